"""A session's turns as timelines (waterfalls): each turn's wait in the queue, its attempts
(with the worker that ran each), model calls, tool calls and waits on a person, placed on
the turn's own time axis. Read by the session's admin page, the chat page (for staff) and
`GET /api/sessions/<id>/timeline`; a page of turns at a time, newest first, by turn id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from gloveapp.turns.models import Turn, TurnStep

MAX_TURNS = 20
DEFAULT_TURNS = 5
QUEUED = "queued"  # the pseudo-step from the post to the first claim


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

    def to_dict(self, *, with_workers: bool) -> dict[str, Any]:
        return {
            "turn": self.turn_id,
            "status": self.status,
            "attempts": self.attempts,
            "createdAt": self.created_at.isoformat(),
            "finishedAt": self.finished_at.isoformat() if self.finished_at else None,
            "spanMs": self.span_ms,
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
            "id", "text", "status", "attempts", "created_at", "started_at", "finished_at"
        )[:limit]
    )
    steps_by_turn: dict[int, list[TurnStep]] = {}
    for step in TurnStep.objects.filter(turn_id__in=[turn.pk for turn in rows]).order_by(
        "turn_id", "started_at", "id"
    ):
        steps_by_turn.setdefault(step.turn_id, []).append(step)
    now = timezone.now()
    return [_timeline(turn, steps_by_turn.get(turn.pk, []), now) for turn in rows]


def _timeline(turn: Turn, steps: list[TurnStep], now: datetime) -> TurnTimeline:
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
    )
