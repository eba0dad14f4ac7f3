"""A wait on an approval is a step of the turn's timeline: how long, who decided, how."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async

from gloveapp.approvals.services import approval_decide
from gloveapp.core.approvals.decisions import Decision
from gloveapp.turns import public as turns
from gloveapp.turns.models import TurnStep
from tests.approvals.test_decision_runs_the_tool import _open_request

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_wait_on_an_approval_names_its_decider_and_channel(
    session_id, barista, orders_agent, turn_worker
):
    request = await _open_request(session_id)
    await sync_to_async(approval_decide)(
        request_id=request.pk,
        decision=Decision("approve", request.fingerprint),
        user=barista,
        channel="rest",
    )
    await turns.wait_until_idle(session_id)

    steps = [
        step
        async for step in TurnStep.objects.filter(turn__session_id=session_id).order_by(
            "started_at", "id"
        )
    ]
    [wait] = [step for step in steps if step.kind == "wait"]
    assert wait.detail["decider"] == barista.username
    assert wait.detail["channel"] == "rest" and wait.detail["decision"] == "approve"
    assert wait.duration_ms is not None and wait.outcome
    # The wait began inside the tool call that asked (the tool ran once it was approved); a
    # tool's duration is whole milliseconds, as the runtime measures it.
    [tool] = [step for step in steps if step.kind == "tool"]
    tool_end = tool.started_at + timedelta(milliseconds=tool.duration_ms + 2)
    assert tool.started_at - timedelta(milliseconds=2) <= wait.started_at <= tool_end
