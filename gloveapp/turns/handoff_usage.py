"""What handoffs cost and what they achieve, for the usage page and `/metrics`: time to a
person (p50/p95), the handoff rate per agent, hand-backs, and chats resolved after a
hand-back.

The usage page reads them from the days' summaries (`UsageDay`): `day_handoffs` sums one
day's audit records into a `HandoffDay` when `usage_rollup` sums that day, streamed in
chunks, so a page reads at most a row a day whatever the records' number. Times to a
person are kept as counts per bucket (WAIT_BOUNDS): p50 and p95 over any window are read
from the summed buckets, as Prometheus reads a histogram.

A chat is *resolved after a hand-back* when the agent's first turn after a person handed it
back ended done: the agent answered, and nobody took the chat again before it did (a turn
withheld by a take-over ends done too, with `WITHHELD` as its error). One rule, read here by
both: the counter when that turn ends (`count_resolved_after_hand_back`), the usage page
from the audit (`handoff_usage`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import OuterRef, Subquery

from gloveapp.conversations.models import HandoffRecord, Session
from gloveapp.lib.db.batches import stop_if_asked
from gloveapp.observe import metrics
from gloveapp.turns.models import Turn

# The upper bounds (seconds) of the buckets a day's times to a person are counted in; one
# more bucket holds the longer ones.
WAIT_BOUNDS = (
    5, 10, 15, 30, 45, 60, 90, 120, 180, 300, 450, 600, 900, 1200, 1800, 2700, 3600,
    5400, 7200, 14400, 28800, 86400,
)  # fmt: skip
CHUNK = 2_000


def _resolved(status: str, error: str) -> bool:
    return status == Turn.Status.DONE and not error


def count_resolved_after_hand_back(*, turn: Turn, status: str, error: str) -> None:
    """Count the chat once its first turn after a hand-back ends done: a probe of the
    audit's (session, id) index, and for a chat whose last change was a hand-back one of
    the turns'."""
    if not _resolved(status, error):
        return
    last = (
        HandoffRecord.objects.filter(session_id=turn.session_id)
        .exclude(kind__in=(HandoffRecord.Kind.NOTE, HandoffRecord.Kind.OVERDUE))
        .order_by("-id")
        .values_list("kind", "created_at")
        .first()
    )
    if last is None or last[0] != HandoffRecord.Kind.HANDED_BACK:
        return
    before = (
        Turn.objects.filter(session_id=turn.session_id, pk__lt=turn.pk)
        .order_by("-id")
        .values_list("created_at", flat=True)
        .first()
    )
    if before is not None and before > last[1]:
        return  # an earlier turn was the first after the hand-back
    agent = Session.objects.filter(pk=turn.session_id).values_list("agent_name", flat=True)
    agent = agent.first() or ""
    transaction.on_commit(
        lambda: metrics.handoff_resolved_after_hand_back(agent=agent or "default")
    )


@dataclass
class HandoffDay:
    """One day's handoffs, kept in its `UsageDay` summary: the handoffs per agent (a
    customer's or the agent's request, or a take-over of a chat the agent answered), the
    claims' times to a person counted per WAIT_BOUNDS bucket, the hand-backs, and those
    the agent's next turn resolved."""

    handoffs: dict[str, int] = field(default_factory=dict)
    waits: list[int] = field(default_factory=lambda: [0] * (len(WAIT_BOUNDS) + 1))
    hand_backs: int = 0
    resolved: int = 0

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> HandoffDay:
        day = cls()
        if data:
            day.handoffs = dict(data.get("handoffs") or {})
            day.hand_backs = int(data.get("hand_backs") or 0)
            day.resolved = int(data.get("resolved") or 0)
            waits = list(data.get("waits") or [])
            if len(waits) == len(day.waits):
                day.waits = waits
        return day

    def add(self, other: HandoffDay) -> None:
        for agent, count in other.handoffs.items():
            self.handoffs[agent] = self.handoffs.get(agent, 0) + count
        self.waits = [mine + theirs for mine, theirs in zip(self.waits, other.waits, strict=True)]
        self.hand_backs += other.hand_backs
        self.resolved += other.resolved


def _bucket(seconds: float) -> int:
    for index, bound in enumerate(WAIT_BOUNDS):
        if seconds <= bound:
            return index
    return len(WAIT_BOUNDS)


def bucket_percentile(counts: list[int], fraction: float) -> float | None:
    """The `fraction` quantile of the times counted in `counts`, interpolated inside its
    bucket (the longest bucket answers its lower bound)."""
    total = sum(counts)
    if not total:
        return None
    rank = fraction * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            if index == len(WAIT_BOUNDS):
                return float(WAIT_BOUNDS[-1])
            lower = 0 if index == 0 else WAIT_BOUNDS[index - 1]
            return lower + (WAIT_BOUNDS[index] - lower) * (rank - seen) / count
        seen += count
    return float(WAIT_BOUNDS[-1])


def day_handoffs(start: datetime, end: datetime) -> HandoffDay:
    """The audit records made in [start, end), summed: each read once, with the turn that
    followed a hand-back and the record before a claim (by the audit's (session, id)
    index)."""
    first_turn = Turn.objects.filter(
        session_id=OuterRef("session_id"), created_at__gt=OuterRef("created_at")
    ).order_by("id")
    # What came before a claim: its request (the wait), or another claim (no new wait).
    before = HandoffRecord.objects.filter(
        session_id=OuterRef("session_id"),
        pk__lt=OuterRef("pk"),
        kind__in=(HandoffRecord.Kind.REQUESTED, HandoffRecord.Kind.CLAIMED),
    ).order_by("-id")
    records = (
        HandoffRecord.objects.filter(created_at__gte=start, created_at__lt=end)
        .exclude(kind__in=(HandoffRecord.Kind.NOTE, HandoffRecord.Kind.OVERDUE))
        .order_by()
        .annotate(
            next_status=Subquery(first_turn.values("status")[:1]),
            next_error=Subquery(first_turn.values("error")[:1]),
            before_kind=Subquery(before.values("kind")[:1]),
            before_at=Subquery(before.values("created_at")[:1]),
        )
        .values_list(
            "kind",
            "from_state",
            "created_at",
            "session__agent_name",
            "next_status",
            "next_error",
            "before_kind",
            "before_at",
        )
    )
    day = HandoffDay()
    handoffs: dict[str, int] = defaultdict(int)
    for count, row in enumerate(records.iterator(chunk_size=CHUNK), 1):
        if count % CHUNK == 0:
            stop_if_asked()
        kind, from_state, created_at, agent, next_status, next_error, before_kind, before_at = row
        agent = agent or "(none)"
        if kind == HandoffRecord.Kind.REQUESTED or (
            kind == HandoffRecord.Kind.TAKEN_OVER and from_state == "agent"
        ):
            handoffs[agent] += 1
        elif kind == HandoffRecord.Kind.CLAIMED and before_kind == HandoffRecord.Kind.REQUESTED:
            day.waits[_bucket(max((created_at - before_at).total_seconds(), 0.0))] += 1
        elif kind == HandoffRecord.Kind.HANDED_BACK:
            day.hand_backs += 1
            if next_status is not None and _resolved(next_status, next_error or ""):
                day.resolved += 1
    day.handoffs = dict(handoffs)
    return day


@dataclass
class HandoffUsage:
    charts: dict[str, Any] = field(default_factory=dict)
    # The whole window's figures: time to a person, the rate per agent, hand-backs.
    summary: dict[str, Any] = field(default_factory=dict)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def handoff_usage(
    *,
    days: list[str],
    summaries: dict[str, HandoffDay],
    agent_turns: dict[str, dict[str, int]],
) -> HandoffUsage:
    """The charts and the window's figures from the days' `summaries` (by day, `days` the
    window's); `agent_turns`: the turns each agent started per day, the rate's denominator."""
    window = HandoffDay()
    for summary in summaries.values():
        window.add(summary)
    agents = sorted(window.handoffs)

    def rate(agent: str, day: str) -> float | None:
        started = agent_turns.get(agent, {}).get(day, 0)
        summary = summaries.get(day)
        count = summary.handoffs.get(agent, 0) if summary else 0
        return round(100 * count / started, 1) if started else None

    def per_day(read) -> list[Any]:
        return [read(summaries[day]) if day in summaries else None for day in days]

    claimed = sum(window.waits)
    charts = {
        "handoff_wait": {
            "title": "Time to a person (s), p50 and p95",
            "type": "line",
            "unit": "s",
            "datasets": [
                {
                    "label": label,
                    "data": per_day(lambda s, q=q: _rounded(bucket_percentile(s.waits, q))),
                }
                for label, q in (("p50", 0.5), ("p95", 0.95))
            ]
            if claimed
            else [],
        },
        "handoff_rate": {
            "title": "Handoff rate per agent (% of its turns)",
            "type": "line",
            "unit": "%",
            "datasets": [
                {"label": agent, "data": [rate(agent, day) for day in days]} for agent in agents
            ],
        },
        "hand_backs": {
            "title": "Hand-backs, and chats resolved after one, per day",
            "type": "bar",
            "unit": "chats",
            "datasets": [
                {
                    "label": "handed back",
                    "data": [s or 0 for s in per_day(lambda s: s.hand_backs)],
                },
                {
                    "label": "resolved after",
                    "data": [s or 0 for s in per_day(lambda s: s.resolved)],
                },
            ]
            if window.hand_backs
            else [],
        },
    }
    total_turns = {agent: sum(per_agent.values()) for agent, per_agent in agent_turns.items()}
    summary = {
        "time_to_person_p50_s": _rounded(bucket_percentile(window.waits, 0.5)),
        "time_to_person_p95_s": _rounded(bucket_percentile(window.waits, 0.95)),
        "claimed": claimed,
        "rates": [
            {
                "agent": agent,
                "handoffs": window.handoffs[agent],
                "turns": total_turns.get(agent, 0),
                "percent": round(100 * window.handoffs[agent] / total_turns[agent], 1)
                if total_turns.get(agent)
                else None,
            }
            for agent in agents
        ],
        "hand_backs": window.hand_backs,
        "resolved_after_hand_back": window.resolved,
    }
    return HandoffUsage(charts=charts, summary=summary)
