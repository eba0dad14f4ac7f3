"""Reminders, escalations and expiries: at their times (a frozen clock), and in a worker."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest

from gloveapp.approvals.models import ApprovalDecision, ApprovalRequest
from gloveapp.approvals.services import approval_open, approvals_sweep
from gloveapp.core.approvals.policy import ApprovalPolicy, approval_prompt
from gloveapp.live.models import LiveEvent
from gloveapp.turns import public as turns
from tests.approvals.agents import ORDER, place_order
from tests.approvals.test_decision_runs_the_tool import _open_request, _tool_results

SECOND = timedelta(seconds=1)


def open_at(session_id, created_at, **policy):
    tool = dataclasses.replace(place_order, approval=ApprovalPolicy(**policy))
    return approval_open(
        session_id=session_id, prompt=approval_prompt(tool, ORDER, tool.approval), now=created_at
    )


@pytest.mark.django_db
def test_each_deadline_fires_once_at_its_time(session_id):
    from django.utils import timezone

    t0 = timezone.now()
    row = open_at(
        session_id,
        t0,
        assignee_group="baristas",
        escalate_to_group="managers",
        remind_after=60,
        escalate_after=120,
        expire_after=600,
    )
    assert approvals_sweep(now=t0 + 59 * SECOND) == {"reminded": 0, "escalated": 0, "expired": 0}
    assert approvals_sweep(now=t0 + 60 * SECOND) == {"reminded": 1, "escalated": 0, "expired": 0}
    assert approvals_sweep(now=t0 + 61 * SECOND)["reminded"] == 0
    assert approvals_sweep(now=t0 + 120 * SECOND) == {"reminded": 0, "escalated": 1, "expired": 0}
    row.refresh_from_db()
    assert row.escalated_at == t0 + 120 * SECOND
    assert row.escalate_to_group.name == "managers"
    assert approvals_sweep(now=t0 + 599 * SECOND)["expired"] == 0
    assert approvals_sweep(now=t0 + 600 * SECOND) == {"reminded": 0, "escalated": 0, "expired": 1}
    assert approvals_sweep(now=t0 + 601 * SECOND)["expired"] == 0
    decision = ApprovalDecision.objects.get(request=row)
    assert (decision.kind, decision.channel, decision.user) == ("reject", "expiry", None)
    assert decision.decided_at == t0 + 600 * SECOND
    assert "expired" in decision.reason
    types = list(
        LiveEvent.objects.filter(stream="approvals").order_by("id").values_list("type", flat=True)
    )
    assert types == [
        "approval.opened",
        "approval.reminded",
        "approval.escalated",
        "approval.decided",
    ]


@pytest.mark.django_db
def test_on_expire_may_approve_or_respond(session_id):
    from django.utils import timezone

    t0 = timezone.now()
    approving = open_at(session_id, t0, expire_after=10, on_expire="approve")
    responding = open_at(
        session_id,
        t0,
        decisions=("approve", "respond"),
        expire_after=10,
        on_expire="respond",
        on_expire_text="We will call you.",
    )
    assert approvals_sweep(now=t0 + 10 * SECOND)["expired"] == 2
    assert ApprovalDecision.objects.get(request=approving).kind == "approve"
    assert ApprovalDecision.objects.get(request=responding).text == "We will call you."


@pytest.mark.django_db(transaction=True)
async def test_a_worker_escalates_and_expires_a_request_the_turn_waits_on(
    settings, session_id, orders_agent, turn_worker
):
    settings.GLOVE_APPROVAL_SWEEP_SECONDS = 0.1
    settings.GLOVE_APPROVAL_TOOL_DEADLINES = {"place_order": "/0.3/1"}
    request = await _open_request(session_id)
    await turns.wait_until_idle(session_id)
    request = await ApprovalRequest.objects.aget(pk=request.pk)
    assert request.escalated_at is not None
    assert (request.status, request.decision) == ("decided", "reject")
    decision = await ApprovalDecision.objects.aget(request=request)
    assert decision.channel == "expiry"
    assert orders_agent.RAN == []
    [result] = await _tool_results(session_id)
    # The agent reads that the request expired, not that a person rejected it.
    assert "expired before anyone decided" in result["message"]
    assert "rejected by a person" not in result["message"]
    await asyncio.sleep(0)
