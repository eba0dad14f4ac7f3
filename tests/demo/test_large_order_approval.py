"""The coffee demo's large order: a barista approves it, perhaps with another quantity."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.approvals.services import approval_decide
from gloveapp.core.approvals.decisions import Decision
from gloveapp.demo.bootstrap import demo_setup
from gloveapp.demo.models import Order
from gloveapp.turns import public as turns
from tests.demo.conftest import last_reply, next_slot, say

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def barista(transactional_db):
    demo_setup()
    return get_user_model().objects.get(username="barista")


def test_setup_demo_makes_the_approvers_and_their_groups(barista):
    manager = get_user_model().objects.get(username="manager")
    assert list(barista.groups.values_list("name", flat=True)) == ["baristas"]
    assert list(manager.groups.values_list("name", flat=True)) == ["managers"]
    assert barista.is_staff and not barista.is_superuser


async def _request(session_id: str) -> ApprovalRequest:
    await next_slot(session_id)  # the customer's "waiting for a staff member" card
    return await ApprovalRequest.objects.select_related("assignee_group").aget(
        session_id=session_id, status="open"
    )


async def test_a_large_checkout_waits_for_a_barista_who_changes_the_quantity(session_id, barista):
    await say(session_id, "add 6 Colombia")
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
    request = await _request(session_id)
    assert request.tool_name == "checkout"
    assert request.args == {
        "payment": "pickup",
        "lines": [{"coffee": "Colombia Huila", "quantity": 6}],
    }
    assert request.assignee_group.name == "baristas"
    assert request.escalate_at - request.created_at == timedelta(minutes=2)

    edited = {"payment": "pickup", "lines": [{"coffee": "Colombia Huila", "quantity": 4}]}
    await sync_to_async(approval_decide)(
        request_id=request.pk,
        decision=Decision("edit", request.fingerprint, args=edited),
        user=barista,
        channel="page",
    )
    slot = await next_slot(session_id)
    while slot.tool_name != "checkout" or slot.template != "tools/coffee/checkout_slot.html":
        slot = await next_slot(session_id)
    assert slot.input["count"] == 4
    assert await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="confirm")
    await turns.wait_until_idle(session_id)
    order = await Order.objects.aget(session_id=session_id)
    assert [line["quantity"] for line in order.lines] == [4]
    assert f"Order #{order.pk} is placed" in await last_reply(session_id)


async def test_a_small_checkout_needs_no_approval(session_id, barista):
    await say(session_id, "add 2 Colombia")
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
    slot = await next_slot(session_id)
    assert slot.template == "tools/coffee/checkout_slot.html"
    assert not await ApprovalRequest.objects.filter(session_id=session_id).aexists()
    await turns.cancel(session_id)
    await turns.wait_until_idle(session_id)
