"""Who may start a chat with which agent (`open_to` in GLOVE_AGENTS): an unknown or
forbidden `agentName` is a 400 naming the field, on the API and on the pages' new chat."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from gloveapp.conversations.models import Session

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def staff_agent(settings):
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "back-office": {"factory": "gloveapp.demo.coffee.build_agent", "open_to": "staff"},
    }


def test_it_refuses_an_agent_nobody_configured(owner_client):
    response = owner_client.post("/api/sessions", {"agentName": "nonexistent"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "agentName"
    assert not Session.objects.exists()


def test_it_refuses_a_customer_the_mesh_only_roastery(owner_client):
    response = owner_client.post("/api/sessions", {"agentName": "roastery"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "agentName"
    # The same words as for an agent that does not exist: nothing learnt about the roastery.
    unknown = owner_client.post("/api/sessions", {"agentName": "nope"}, format="json")
    assert response.json()["error"].replace("roastery", "X") == unknown.json()["error"].replace(
        "nope", "X"
    )


def test_it_opens_the_coffee_agent_and_the_default_to_customers(owner_client):
    assert owner_client.post("/api/sessions", {"agentName": "coffee"}, format="json").status_code
    assert owner_client.post("/api/sessions", {}, format="json").status_code == 201


def test_it_opens_a_staff_agent_to_staff_only(staff_agent, owner, owner_client):
    refused = owner_client.post("/api/sessions", {"agentName": "back-office"}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "agentName"
    owner.is_staff = True
    owner.save()
    allowed = owner_client.post("/api/sessions", {"agentName": "back-office"}, format="json")
    assert allowed.status_code == 201


def test_the_new_chat_page_refuses_a_forbidden_agent(client, owner):
    client.force_login(owner)
    refused = client.post("/sessions/new", {"agent": "roastery"})
    assert refused.status_code == 400
    assert refused.content.decode().startswith("agent:")
    opened = client.post("/sessions/new", {"agent": "coffee"})
    assert opened.status_code == 303
    assert list(Session.objects.values_list("agent_name", flat=True)) == ["coffee"]


def test_the_checks_refuse_an_unknown_audience_and_a_mesh_only_default(settings):
    settings.GLOVE_AGENTS = {
        "coffee": {"factory": "gloveapp.demo.coffee.build_agent", "open_to": "everyone"},
        "roastery": {"factory": "gloveapp.demo.roastery.build_agent", "open_to": "mesh"},
    }
    with pytest.raises(SystemCheckError, match=r"glove\.E011"):
        call_command("check")
    settings.GLOVE_AGENTS["coffee"] = "gloveapp.demo.coffee.build_agent"
    settings.GLOVE_DEFAULT_AGENT = "roastery"
    with pytest.raises(SystemCheckError, match=r"glove\.E012"):
        call_command("check")
