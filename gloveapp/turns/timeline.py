"""A session's turns as timelines (waterfalls): each turn's wait in the queue, its attempts
(with the worker that ran each), model calls, tool calls, waits on a person and the changes
of who answers the chat (the handoff's audit), placed on the turn's own time axis. Read by the session's admin page, the chat page (for staff) and
`GET /api/sessions/<id>/timeline`; a page of turns at a time, newest first, by turn id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Subquery
from django.utils import timezone

from gloveapp.agents.labels import tool_label, tool_labels
from gloveapp.approvals.selectors import awaited_by_slot
from gloveapp.conversations.models import HandoffRecord, Session
from gloveapp.turns.models import Turn, TurnSlot, TurnStep
from gloveapp.versions.selectors import version_labels

MAX_TURNS = 20
DEFAULT_TURNS = 5
QUEUED = "queued"  # the pseudo-step from the post to the first claim
# A change of who answers the chat: a step of the turn it happened in, or else of the turn
# before it (the chat's last turn when it changed), read from the handoff's audit.
ANSWERER = "answerer"
ANSWERER_WORDS = {
    HandoffRecord.Kind.REQUESTED: "{by} asked for a person",
    HandoffRecord.Kind.CLAIMED: "{by} claimed the chat",
    HandoffRecord.Kind.TAKEN_OVER: "{by} took the chat over",
    HandoffRecord.Kind.HANDED_BACK: "{by} handed the chat back to the agent",
    HandoffRecord.Kind.CLOSED: "{by} closed the chat",
}
WAIT_WORDS = {"approval_request": "approval", "permission_request": "the customer's permission"}


def duration_words(ms: float | None) -> str:
    """A duration as people read it: "0.3 s", "42 s", "5 min", "2 h 5 min"."""
    if ms is None:
        return ""
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


@dataclass(slots=True)
class StepView:
    kind: str
    name: str
    attempt: int
    worker_id: str
    started_at: datetime
    duration_ms: int | None
    outcome: str
    detail: dict[str, Any] | None
    # Where the bar sits on the turn's axis, in thousandths of its span (an SVG viewBox).
    offset: int = 0
    width: int = 0
    # The step in words (`_titled`): "Waited in the queue", "Attempt 2", "Tool: Checkout",
    # "Waiting for a barista to approve the checkout".
    title: str = ""

    @property
    def took(self) -> str:
        return duration_words(self.duration_ms)

    def to_dict(self, *, with_workers: bool) -> dict[str, Any]:
        found = {
            "kind": self.kind,
            "name": self.name,
            "attempt": self.attempt,
            "startedAt": self.started_at.isoformat(),
            "durationMs": self.duration_ms,
            "outcome": self.outcome,
            "detail": self.detail or {},
        }
        if with_workers:
            found["workerId"] = self.worker_id
        elif "previous_worker" in found["detail"]:
            found["detail"] = {k: v for k, v in found["detail"].items() if k != "previous_worker"}
        return found


@dataclass(slots=True)
class TurnTimeline:
    turn_id: int
    text: str
    status: str
    attempts: int
    created_at: datetime
    finished_at: datetime | None
    span_ms: int
    steps: list[StepView] = field(default_factory=list)
    # The agent version it ran on ("coffee v3"; empty: the code's factory alone).
    version: str = ""

    @property
    def took(self) -> str:
        return duration_words(self.span_ms)

    def to_dict(self, *, with_workers: bool) -> dict[str, Any]:
        return {
            "turn": self.turn_id,
            "status": self.status,
            "attempts": self.attempts,
            "createdAt": self.created_at.isoformat(),
            "finishedAt": self.finished_at.isoformat() if self.finished_at else None,
            "spanMs": self.span_ms,
            "version": self.version or None,
            "steps": [step.to_dict(with_workers=with_workers) for step in self.steps],
        }


def _end(step: StepView, now: datetime) -> datetime:
    if step.duration_ms is None:
        return now
    return step.started_at + timedelta(milliseconds=step.duration_ms)


def session_timelines(
    session_id: str, *, before: int | None = None, limit: int = DEFAULT_TURNS
) -> list[TurnTimeline]:
    """The newest `limit` turns of the session (older than turn id `before`), each with its
    steps: two indexed reads, whatever the session's length."""
    limit = max(1, min(limit, MAX_TURNS))
    turns = Turn.objects.filter(session_id=session_id)
    if before is not None:
        turns = turns.filter(pk__lt=before)
    rows = list(
        turns.order_by("-id").only(
            "id",
            "text",
            "status",
            "attempts",
            "created_at",
            "started_at",
            "finished_at",
            "agent_version_id",
        )[:limit]
    )
    steps_by_turn: dict[int, list[TurnStep]] = {}
    for step in TurnStep.objects.filter(turn_id__in=[turn.pk for turn in rows]).order_by(
        "turn_id", "started_at", "id"
    ):
        steps_by_turn.setdefault(step.turn_id, []).append(step)
    now = timezone.now()
    open_waits = _open_waits(session_id, [turn.pk for turn in rows if turn.status != "done"])
    changes = _answerer_changes(session_id, rows, newer_than_page=before)
    agent_name = Session.objects.filter(pk=session_id).values_list("agent_name", flat=True).first()
    labels = tool_labels(agent_name)
    versions = version_labels([turn.agent_version_id for turn in rows])
    timelines = []
    for turn in rows:
        found = steps_by_turn.get(turn.pk, []) + open_waits.get(turn.pk, [])
        if turn.pk in changes:
            found = sorted(found + changes[turn.pk], key=lambda step: step.started_at)
        timeline = _timeline(turn, found, now, versions.get(turn.agent_version_id, ""))
        for step in timeline.steps:
            step.title = step.title or _titled(step, agent_name, labels)
        timelines.append(timeline)
    return timelines


def _answerer_changes(
    session_id: str, turns: list[Turn], *, newer_than_page: int | None
) -> dict[int, list[Any]]:
    """The changes of who answers since the page's oldest turn began (up to the turn after
    the page), each as an instant step of the newest turn that began before it: one read of
    the audit's (session, id) index, at most a screen of rows."""
    if not turns:
        return {}
    records = HandoffRecord.objects.filter(
        session_id=session_id, created_at__gte=turns[-1].created_at
    ).exclude(kind__in=(HandoffRecord.Kind.NOTE, HandoffRecord.Kind.OVERDUE))
    if newer_than_page is not None:
        after = Turn.objects.filter(pk=newer_than_page).values_list("created_at", flat=True)
        records = records.filter(created_at__lt=Subquery(after[:1]))
    changes: dict[int, list[Any]] = {}
    rows = records.order_by("id").only(
        "kind", "from_state", "to_state", "actor_label", "via", "group", "created_at"
    )
    for record in rows[: MAX_TURNS * 5]:
        turn = next(turn for turn in turns if turn.created_at <= record.created_at)
        step = TurnStep(
            turn_id=turn.pk,
            kind=ANSWERER,
            name=record.kind,
            attempt=0,
            worker_id="",
            started_at=record.created_at,
            duration_ms=0,
            outcome=record.to_state,
            detail={
                "from": record.from_state,
                "to": record.to_state,
                "by": record.actor_label,
                "via": record.via,
                "group": record.group,
            },
        )
        changes.setdefault(turn.pk, []).append(step)
    return changes


def _open_waits(session_id: str, turn_ids: list[int]) -> dict[int, list[Any]]:
    """The waits the unfinished turns are in now (an open prompt on a person), as steps
    still running: what, who, since when; the stored `wait` step comes when it closes."""
    if not turn_ids:
        return {}
    slots = list(
        TurnSlot.objects.filter(
            turn_id__in=turn_ids, status=TurnSlot.Status.OPEN, waits_for_answer=True
        ).order_by("pk")[:20]
    )
    if not slots:
        return {}
    awaited = awaited_by_slot(session_id)
    waits: dict[int, list[Any]] = {}
    for slot in slots:
        public = f"t{slot.turn_id}-{slot.slot_id}"
        who, _ = awaited.get(public, ("the customer", ""))
        since = timezone.localtime(slot.created_at)
        step = TurnStep(
            turn_id=slot.turn_id,
            kind=TurnStep.Kind.WAIT,
            name=slot.renderer,
            attempt=0,
            worker_id="",
            started_at=slot.created_at,
            duration_ms=None,
            outcome="waiting",
            detail={"tool_name": slot.tool_name, "since": f"{since:%H:%M}", "who": who},
        )
        waits.setdefault(slot.turn_id, []).append(step)
    return waits


def _titled(step: StepView, agent_name: str | None, labels: dict[str, str]) -> str:
    detail = step.detail or {}
    if step.kind == QUEUED:
        return "Waited in the queue"
    if step.kind == ANSWERER:
        words = ANSWERER_WORDS.get(step.name, "{by} changed who answers")
        return words.format(by=detail.get("by") or "someone")
    if step.kind == TurnStep.Kind.ATTEMPT:
        return f"Attempt {step.attempt}" if step.attempt else "Attempt"
    if step.kind == TurnStep.Kind.TOOL:
        return f"Tool: {tool_label(agent_name, step.name, labels)}"
    if step.kind == TurnStep.Kind.WAIT:
        tool = detail.get("tool_name") or ""
        what = tool_label(agent_name, tool, labels).lower() if tool else "answer"
        if step.duration_ms is None:
            who = detail.get("who") or "the customer"
            verb = "approve" if step.name == "approval_request" else "answer"
            return f"Waiting for {who} to {verb} the {what} since {detail.get('since', '')}".strip()
        return f"Waited for {WAIT_WORDS.get(step.name, 'an answer')} ({what})"
    if step.kind == TurnStep.Kind.MODEL:
        return f"Model call ({step.name})" if step.name else "Model call"
    return f"{step.kind.capitalize()} {step.name}".strip()


def _timeline(turn: Turn, steps: list[TurnStep], now: datetime, version: str = "") -> TurnTimeline:
    views = [
        StepView(
            kind=step.kind,
            name=step.name,
            attempt=step.attempt,
            worker_id=step.worker_id,
            started_at=step.started_at,
            duration_ms=step.duration_ms,
            outcome=step.outcome,
            detail=step.detail,
        )
        for step in steps
    ]
    first_claim = min(
        (view.started_at for view in views if view.kind == TurnStep.Kind.ATTEMPT),
        default=turn.started_at,
    )
    if first_claim is not None and first_claim > turn.created_at:
        waited = int((first_claim - turn.created_at).total_seconds() * 1000)
        views.insert(
            0,
            StepView(
                kind=QUEUED,
                name="in the queue",
                attempt=0,
                worker_id="",
                started_at=turn.created_at,
                duration_ms=waited,
                outcome="",
                detail=None,
            ),
        )
    end = turn.finished_at or now
    for view in views:
        end = max(end, _end(view, now))
    span = max((end - turn.created_at).total_seconds() * 1000, 1.0)
    for view in views:
        start_ms = (view.started_at - turn.created_at).total_seconds() * 1000
        length = (_end(view, now) - view.started_at).total_seconds() * 1000
        view.offset = max(0, min(1000, int(start_ms / span * 1000)))
        # At least a sliver, so an instant step is still seen.
        view.width = max(4, min(1000 - view.offset, int(length / span * 1000)))
    return TurnTimeline(
        turn_id=turn.pk,
        text=turn.text,
        status=turn.status,
        attempts=turn.attempts,
        created_at=turn.created_at,
        finished_at=turn.finished_at,
        span_ms=int(span),
        steps=views,
        version=version,
    )
