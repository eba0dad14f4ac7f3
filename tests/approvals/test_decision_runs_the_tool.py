"""A decision reaches the waiting turn, and the tool runs with exactly what was decided."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from gloveapp.approvals.models import ApprovalDecision, ApprovalRequest
from gloveapp.approvals.services import AlreadyDecided, StaleDecision, approval_decide
from gloveapp.conversations.models import Message
from gloveapp.core.approvals.decisions import Decision, fingerprint
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from tests.approvals.agents import ORDER

pytestmark = pytest.mark.django_db(transaction=True)


async def _open_request(session_id: str) -> ApprovalRequest:
    await turns.submit_message(session_id=session_id, text="order the usual")
    for _ in range(3000):
        row = await ApprovalRequest.objects.filter(session_id=session_id, status="open").afirst()
        if row is not None:
            return row
        await asyncio.sleep(0.01)
    raise AssertionError("the turn never asked for an approval")


async def _tool_results(session_id: str) -> list[dict]:
    results = []
    async for row in Message.objects.filter(session_id=session_id).order_by("seq"):
        results += [result["result"] for result in row.tool_results or []]
    return results


decide = sync_to_async(approval_decide)


async def test_edit_then_approve_runs_the_tool_with_the_edited_arguments(
    session_id, barista, orders_agent, turn_worker
):
    request = await _open_request(session_id)
    # The customer's page cannot answer it: only a recorded decision can.
    [slot] = await sync_to_async(turns.visible_slots)(session_id)
    assert not await turns.answer_slot(session_id=session_id, slot_id=slot.id, value=True)

    edited = {"product": "Yirgacheffe", "quantity": 3}
    await decide(
        request_id=request.pk,
        decision=Decision("edit", request.fingerprint, args=edited),
        user=barista,
        channel="rest",
    )
    await turns.wait_until_idle(session_id)

    assert orders_agent.RAN == [edited]
    [result] = await _tool_results(session_id)
    assert result["data"] == {"ordered": 3, "product": "Yirgacheffe"}
    request = await ApprovalRequest.objects.aget(pk=request.pk)
    assert request.delivered_at is not None
    assert (await Turn.objects.filter(session_id=session_id).alast()).status == "done"


async def test_a_stale_fingerprint_is_refused_and_the_tool_does_not_run(
    session_id, barista, orders_agent, turn_worker
):
    request = await _open_request(session_id)
    stale = fingerprint("place_order", {**ORDER, "quantity": 1})
    with pytest.raises(StaleDecision):
        await decide(
            request_id=request.pk, decision=Decision("approve", stale), user=barista, channel="rest"
        )
    await asyncio.sleep(0.3)
    assert orders_agent.RAN == []
    await decide(
        request_id=request.pk,
        decision=Decision("reject", request.fingerprint, reason="Out of beans"),
        user=barista,
        channel="page",
    )
    await turns.wait_until_idle(session_id)
    assert orders_agent.RAN == []
    [result] = await _tool_results(session_id)
    assert result["status"] == "error"
    assert "Reason: Out of beans" in result["message"]


async def test_a_stopped_turn_withdraws_its_request(session_id, barista, orders_agent, turn_worker):
    request = await _open_request(session_id)
    assert await turns.cancel(session_id)
    await turns.wait_until_idle(session_id)
    assert (await ApprovalRequest.objects.aget(pk=request.pk)).status == "withdrawn"
    with pytest.raises(AlreadyDecided, match="withdrawn"):
        await decide(
            request_id=request.pk,
            decision=Decision("approve", request.fingerprint),
            user=barista,
            channel="rest",
        )
    assert orders_agent.RAN == []


@pytest.mark.postgres
def test_fifty_concurrent_deciders_make_exactly_one_decision(
    requires_postgres, session_id, barista
):
    from tests.approvals.helpers import open_request

    request = open_request(session_id)
    start = threading.Barrier(50)
    outcomes: list[str] = []

    def decider(index: int) -> None:
        try:
            start.wait()
            kind = "approve" if index % 2 else "reject"
            approval_decide(
                request_id=request.pk,
                decision=Decision(kind, request.fingerprint),
                user=barista,
                channel="rest",
            )
            outcomes.append("won")
        except AlreadyDecided as lost:
            assert lost.winner is not None
            outcomes.append("lost")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=decider, args=(index,)) for index in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["lost"] * 49 + ["won"]
    assert ApprovalDecision.objects.filter(request=request).count() == 1
