"""approval_decide: the one guarded decision, from any process."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from gloveapp.approvals.models import ApprovalDecision, ApprovalRequest
from gloveapp.approvals.services import (
    AlreadyDecided,
    ApprovalNotFound,
    DecisionInvalid,
    NotYoursToDecide,
    StaleDecision,
    approval_decide,
)
from gloveapp.core.approvals.decisions import Decision, fingerprint
from tests.approvals.agents import ORDER
from tests.approvals.helpers import open_request

pytestmark = pytest.mark.django_db


def approve(request, **kwargs) -> Decision:
    return Decision("approve", request.fingerprint, **kwargs)


def test_it_opens_a_request_routed_to_the_tools_group_with_its_fingerprint(session_id, barista):
    request = open_request(session_id)
    assert request.status == "open"
    assert request.fingerprint == fingerprint("place_order", ORDER)
    assert request.assignee_group.name == "baristas"
    assert request.decisions == ["approve", "edit", "reject", "respond"]
    # GLOVE_APPROVAL_EXPIRE_SECONDS by default.
    assert request.expires_at == request.created_at + timedelta(seconds=3600)


def test_per_tool_deadlines_from_settings_win(settings, session_id):
    settings.GLOVE_APPROVAL_TOOL_DEADLINES = {"place_order": "60/120/600"}
    request = open_request(session_id)
    assert request.remind_at - request.created_at == timedelta(seconds=60)
    assert request.escalate_at - request.created_at == timedelta(seconds=120)
    assert request.expires_at - request.created_at == timedelta(seconds=600)


def test_a_router_in_settings_assigns_the_request(settings, session_id, other_staff):
    settings.GLOVE_APPROVAL_ROUTER = "tests.approvals.test_decide_service.route_to_otto"
    assert open_request(session_id).assignee_user == other_staff


def route_to_otto(request):
    return {"user": "otto", "group": None}


def test_a_group_member_decides_and_the_audit_says_who_how_and_on_what(session_id, barista):
    request = open_request(session_id)
    made = approval_decide(
        request_id=request.pk, decision=approve(request), user=barista, channel="page"
    )
    assert (made.kind, made.username, made.channel) == ("approve", "bea", "page")
    assert made.fingerprint_seen == request.fingerprint
    request.refresh_from_db()
    assert (request.status, request.decision) == ("decided", "approve")


def test_an_edit_is_recorded_with_its_arguments_and_checked_against_the_tool(session_id, barista):
    request = open_request(session_id)
    with pytest.raises(DecisionInvalid, match="quantity"):
        approval_decide(
            request_id=request.pk,
            decision=Decision("edit", request.fingerprint, args={"product": "A", "quantity": "x"}),
            user=barista,
            channel="rest",
        )
    edited = {"product": "Yirgacheffe", "quantity": 2}
    made = approval_decide(
        request_id=request.pk,
        decision=Decision("edit", request.fingerprint, args=edited),
        user=barista,
        channel="rest",
    )
    assert made.args == edited


def test_a_stale_fingerprint_is_refused_and_changes_nothing(session_id, barista):
    request = open_request(session_id)
    stale = fingerprint("place_order", {**ORDER, "quantity": 1})
    with pytest.raises(StaleDecision):
        approval_decide(
            request_id=request.pk, decision=Decision("approve", stale), user=barista, channel="rest"
        )
    request.refresh_from_db()
    assert request.status == "open"
    assert not ApprovalDecision.objects.exists()


def test_the_second_decider_learns_who_won(session_id, barista, manager):
    request = open_request(session_id)
    approval_decide(
        request_id=request.pk,
        decision=Decision("reject", request.fingerprint, reason="no"),
        user=barista,
        channel="page",
    )
    with pytest.raises(AlreadyDecided) as lost:
        approval_decide(request_id=request.pk, decision=approve(request), channel="python")
    assert lost.value.winner["decision"] == "reject"
    assert lost.value.winner["by"] == "bea"
    assert "reject by bea" in str(lost.value)


def test_only_its_assignees_decide_an_assigned_request(session_id, barista, other_staff, customer):
    request = open_request(session_id)
    for outsider in (other_staff, customer):
        with pytest.raises(NotYoursToDecide):
            approval_decide(
                request_id=request.pk, decision=approve(request), user=outsider, channel="page"
            )
    unassigned = open_request(session_id, assignee_group=None)
    approval_decide(
        request_id=unassigned.pk, decision=approve(unassigned), user=other_staff, channel="page"
    )


def test_escalation_lets_its_group_decide_too(session_id, manager):
    request = open_request(session_id)
    with pytest.raises(NotYoursToDecide):
        approval_decide(
            request_id=request.pk, decision=approve(request), user=manager, channel="page"
        )
    ApprovalRequest.objects.filter(pk=request.pk).update(escalated_at=timezone.now())
    approval_decide(request_id=request.pk, decision=approve(request), user=manager, channel="page")


def test_decisions_it_does_not_allow_and_unknown_ids_are_refused(session_id, barista):
    request = open_request(session_id, decisions=("approve", "reject"), assignee_group="baristas")
    with pytest.raises(DecisionInvalid):
        approval_decide(
            request_id=request.pk,
            decision=Decision("respond", request.fingerprint, text="hi"),
            user=barista,
            channel="page",
        )
    for unknown in ("00000000-0000-0000-0000-000000000000", "nope", None, 12):
        with pytest.raises(ApprovalNotFound):
            approval_decide(
                request_id=unknown, decision=approve(request), user=barista, channel="page"
            )
    with pytest.raises(ValueError):
        approval_decide(request_id=request.pk, decision=approve(request), channel="carrier-pigeon")
