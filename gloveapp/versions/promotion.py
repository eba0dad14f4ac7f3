"""Publishing through a person: with `AgentPointer.publish_needs_approval`, publishing a
version opens an approval in /approvals/ (on the agent's publications session, with the
replay report linked in its arguments) instead of moving the pointer; once someone decides
it, `publish_requests_settle` publishes the version, or records the refusal, exactly once.

The decision is data: it waits in the database whatever process stops meanwhile, and the
settle runs from the turn worker's scheduler and from the agent's admin page, so an approved
version is published by whichever comes first (a conditional update on the request's state
decides which).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.approvals.services import approval_open
from gloveapp.conversations.models import Session
from gloveapp.conversations.services import session_create
from gloveapp.core.approvals.decisions import APPROVE, REJECT, fingerprint
from gloveapp.versions.models import AgentPointer, AgentVersion, PublishRequest, ReplayRun
from gloveapp.versions.services import VersionConflict, version_publish

# The "tool" an approval to publish names (no agent offers it: the approvals' vocabulary).
PUBLISH_TOOL = "publish_agent_version"


def publications_session_id(agent_name: str) -> str:
    return f"agent-versions-{agent_name}"


def _publications_session(agent_name: str) -> str:
    """The session the agent's publication approvals belong to (nobody chats in it)."""
    session_id = publications_session_id(agent_name)
    if not Session.objects.filter(pk=session_id).exists():
        session_create(
            agent_name=agent_name, title=f"Publications of {agent_name}", session_id=session_id
        )
    return session_id


def publish_request(
    *, version: AgentVersion, by: Any = None, replay_run: ReplayRun | None = None
) -> PublishRequest:
    """Ask a person to approve publishing `version`, the replay's report linked."""
    pointer = AgentPointer.objects.filter(agent_name=version.agent_name).first()
    args: dict[str, Any] = {
        "agent": version.agent_name,
        "version": version.number,
        "note": version.note,
        "published_now": str(pointer.published) if pointer and pointer.published else "code",
        "replay_report": "",
    }
    if replay_run is not None:
        args["replay_report"] = reverse("admin:versions_replayrun_change", args=[replay_run.pk])
        args["replay"] = (
            f"run {replay_run.pk}: {replay_run.diverged} of {replay_run.done} conversations "
            f"diverged, {replay_run.failed_checks} failed a check"
        )
    with transaction.atomic():
        approval = approval_open(
            session_id=_publications_session(version.agent_name),
            prompt={
                "toolName": PUBLISH_TOOL,
                "toolInput": args,
                "fingerprint": fingerprint(PUBLISH_TOOL, args),
                "policy": {"decisions": [APPROVE, REJECT]},
            },
            requested_by=by,
        )
        return PublishRequest.objects.create(
            version=version,
            replay_run=replay_run,
            published_when_asked=pointer.published if pointer else None,
            approval_id=approval.pk,
            requested_by=by if getattr(by, "pk", None) else None,
        )


def publish_requests_settle(*, agent_name: str | None = None) -> int:
    """Publish the approved requests, close the refused ones; how many were settled."""
    pending = PublishRequest.objects.filter(state=PublishRequest.State.PENDING)
    if agent_name is not None:
        pending = pending.filter(version__agent_name=agent_name)
    settled = 0
    for request in pending.select_related("version", "replay_run")[:100]:
        approval = (
            ApprovalRequest.objects.filter(pk=request.approval_id)
            .values_list("status", "decision")
            .first()
        )
        status, decision = approval or (ApprovalRequest.Status.WITHDRAWN, "")
        if status == ApprovalRequest.Status.OPEN:
            continue
        with transaction.atomic():
            # Two settlers at once: the state in the WHERE clause lets one of them through.
            if not PublishRequest.objects.filter(
                pk=request.pk, state=PublishRequest.State.PENDING
            ).update(settled_at=timezone.now(), state=PublishRequest.State.REJECTED):
                continue
            state = PublishRequest.State.REJECTED
            if status == ApprovalRequest.Status.DECIDED and decision == APPROVE:
                try:
                    version_publish(
                        version=request.version,
                        by=request.requested_by,
                        expected_published_id=request.published_when_asked_id,
                        replay_run=request.replay_run,
                    )
                    state = PublishRequest.State.PUBLISHED
                except VersionConflict:
                    state = PublishRequest.State.STALE
            PublishRequest.objects.filter(pk=request.pk).update(state=state)
        settled += 1
    return settled
