"""The headless agent API takes only what it declares: a turn with fields it does not know
(`images`) or a `webhook` that is not an http(s) URL is a 400 naming them, not a turn that
silently ignores them; a slot's
answer must fit the slot's declared `answerSchema` (a 400 naming the field)."""

from __future__ import annotations

import pytest

from gloveapp.conversations.models import Session
from gloveapp.turns.models import Turn, TurnSlot

pytestmark = pytest.mark.django_db


@pytest.fixture
def coffee_session(owner, owner_client) -> str:
    made = owner_client.post("/api/sessions", {"agentName": "coffee"}, format="json")
    assert made.status_code == 201, made.json()
    return made.json()["sessionId"]


@pytest.mark.parametrize("extra", [{"images": ["x.png"]}, {"webhook": "ftp://example.com"}])
def test_a_turn_with_an_unknown_or_bad_field_is_a_400_naming_it(
    owner_client, coffee_session, extra
):
    response = owner_client.post(
        f"/api/sessions/{coffee_session}/agent/turns", {"text": "Hi", **extra}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["field"] == next(iter(extra))
    assert not Turn.objects.exists()


@pytest.fixture
def checkout_slot(owner, coffee_session) -> str:
    """The coffee checkout's Confirm / Cancel prompt, waiting on the customer."""
    session = Session.objects.get(owner=owner, key=coffee_session)
    turn = Turn.objects.create(session=session, user=owner, text="checkout", status="running")
    TurnSlot.objects.create(
        turn=turn,
        session=session,
        slot_id="s1",
        renderer="checkout",
        tool_name="checkout",
        waits_for_answer=True,
        template="",
    )
    return f"t{turn.pk}-s1"


@pytest.mark.parametrize(
    ("answer", "field"),
    [({"confirmed": "yes"}, "value.confirmed"), ({}, "value"), ("confirm", "value")],
)
def test_an_answer_that_does_not_fit_the_answer_schema_is_a_400(
    owner_client, coffee_session, checkout_slot, answer, field
):
    response = owner_client.post(
        f"/api/sessions/{coffee_session}/slots/{checkout_slot}", {"value": answer}, format="json"
    )

    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field
    assert TurnSlot.objects.get().status == "open"


def test_an_answer_that_fits_is_taken(owner_client, coffee_session, checkout_slot):
    response = owner_client.post(
        f"/api/sessions/{coffee_session}/slots/{checkout_slot}",
        {"value": {"confirmed": True}},
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert TurnSlot.objects.get().answer == {"value": {"confirmed": True}}


def test_an_answer_with_an_unknown_field_is_a_400(owner_client, coffee_session, checkout_slot):
    response = owner_client.post(
        f"/api/sessions/{coffee_session}/slots/{checkout_slot}",
        {"value": {"confirmed": True}, "later": True},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["field"] == "later"
