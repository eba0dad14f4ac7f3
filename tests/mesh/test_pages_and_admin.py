"""Mesh traffic in the admin (filters by sender, recipient, state) and on the chat page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.conversations.services import session_create
from gloveapp.core.types import InboxItem
from inbox.models import InboxItem as InboxItemModel
from inbox.services import inbox_item_add

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def add(session_id: str, item_id: str, tag: str, status: str = "resolved", text: str = "hi"):
    inbox_item_add(
        session_id=session_id,
        item=InboxItem(
            id=item_id,
            tag=tag,
            request=f"request {item_id}",
            response=text if status != "pending" else None,
            status=status,
            blocking=status == "pending",
        ),
    )


@pytest.fixture
def traffic(db):
    for agent in ("shop", "roastery"):
        session_create(session_id=f"mesh:{agent}", agent_name="coffee")
    add("mesh:roastery", "inbox_1_q", "mesh:from:shop", text="How much Kenya AA?")
    add("mesh:shop", "inbox_2_a", "mesh:from:roastery", text="12 bags")
    add("mesh:shop", "inbox_3_w", "mesh:waiting:msg_shop_1", status="pending")
    add("mesh:shop", "inbox_4_b", "mesh:broadcast:from:roastery", text="fresh roast")
    add("mesh:shop", "inbox_5_other", "restock_watch", status="pending")


@pytest.fixture
def staff_client(db):
    user = get_user_model().objects.create_user(
        "stella", password="x", is_staff=True, is_superuser=True
    )
    client = Client()
    client.force_login(user)
    return client


def listed(client, query: str = "") -> str:
    response = client.get(f"/admin/mesh/meshtraffic/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_the_admin_lists_only_mesh_items(traffic, staff_client):
    html = listed(staff_client)
    for item_id in ("inbox_1_q", "inbox_2_a", "inbox_3_w", "inbox_4_b"):
        assert item_id in html
    assert "inbox_5_other" not in html


def test_the_admin_filters_traffic_by_sender_recipient_and_state(traffic, staff_client):
    by_roastery = listed(staff_client, "?sender=roastery")
    assert "inbox_2_a" in by_roastery and "inbox_4_b" in by_roastery
    assert "inbox_1_q" not in by_roastery and "inbox_3_w" not in by_roastery
    to_roastery = listed(staff_client, "?recipient=mesh%3Aroastery")
    assert "inbox_1_q" in to_roastery and "inbox_2_a" not in to_roastery
    pending = listed(staff_client, "?status__exact=pending")
    assert "inbox_3_w" in pending and "inbox_2_a" not in pending


def test_it_lets_staff_remove_an_agent_but_never_edit_what_the_mesh_wrote(traffic, staff_client):
    from mesh.models import MeshAgent, MeshDelivery

    MeshAgent.objects.create(agent_id="roastery", name="Roastery")
    delivery = MeshDelivery.objects.create(
        message_id="msg_1", recipient="roastery", sender="shop", kind="direct", body={}
    )

    assert staff_client.get("/admin/mesh/meshagent/roastery/delete/").status_code == 200
    refused = [
        "/admin/mesh/meshagent/add/",
        "/admin/mesh/meshtraffic/add/",
        "/admin/mesh/meshdelivery/add/",
        f"/admin/mesh/meshdelivery/{delivery.pk}/delete/",
        "/admin/mesh/meshtraffic/inbox_1_q/delete/",
    ]
    assert [staff_client.get(url).status_code for url in refused] == [403] * len(refused)
    # Shown read-only: no form to save.
    page = staff_client.get("/admin/mesh/meshagent/roastery/change/").content.decode()
    assert 'name="_save"' not in page


def test_outsiders_do_not_see_the_traffic(traffic):
    response = Client().get("/admin/mesh/meshtraffic/")
    assert response.status_code == 302  # to the login page


def test_the_chat_page_names_each_inbox_items_kind_in_words(db):
    owner = get_user_model().objects.create_user("olive", password="x")
    session = session_create(owner=owner, agent_name="coffee")
    add(session.pk, "inbox_9_mesh", "mesh:from:roastery", text="12 bags of Kenya AA")
    add(session.pk, "inbox_8_plain", "restock_watch", text="Sidamo is back")
    client = Client()
    client.force_login(owner)
    html = client.get(f"/sessions/{session.pk}/").content.decode()
    mesh_item = html[html.index('data-item-id="inbox_9_mesh"') - 120 :]
    plain_item = html[html.index('data-item-id="inbox_8_plain"') - 120 :]
    assert "inbox-item--mesh" in mesh_item[:200]
    assert '<strong class="inbox-item__title">Message from Roastery</strong>' in mesh_item[:400]
    assert "inbox-item--mesh" not in plain_item[:200]
    assert '<strong class="inbox-item__title">Restock watch</strong>' in plain_item[:400]
    assert "restock_watch" not in html and "mesh:" not in html


def test_the_chat_page_shows_one_card_per_mesh_answer_without_internal_ids(db):
    owner = get_user_model().objects.create_user("olive", password="x")
    session = session_create(owner=owner, agent_name="coffee")
    message_id = "msg_chat-glove_5f1e0c2a9b_1764100000000_ab12cd"
    waiting = InboxItem(
        id="inbox_1_wait",
        tag=f"mesh:waiting:{message_id}",
        request=f'Waiting for response from "Roastery" (roastery) to message {message_id}',
        status="pending",
        blocking=True,
    )
    inbox_item_add(session_id=session.pk, item=waiting)
    client = Client()
    client.force_login(owner)
    before = client.get(f"/sessions/{session.pk}/").content.decode()
    inbox_item_add(
        session_id=session.pk,
        item=InboxItem(
            id="inbox_2_reply",
            tag="mesh:from:roastery",
            request=f'Message from "Roastery" (roastery) [message id: msg_r_1] '
            f"(replying to {message_id})",
            response="We have 12 bags of Kenya AA.",
            status="resolved",
        ),
    )
    InboxItemModel.objects.filter(pk="inbox_1_wait").update(
        status="resolved", response="We have 12 bags of Kenya AA."
    )

    html = client.get(f"/sessions/{session.pk}/").content.decode()
    inbox = html.split('id="inbox"')[1].split("</section>")[0]

    assert "Waiting for Roastery" in before and message_id not in before
    assert inbox.count("We have 12 bags of Kenya AA.") == 1
    assert "Roastery answered" in inbox
    assert "mesh:" not in inbox and "msg_" not in inbox
