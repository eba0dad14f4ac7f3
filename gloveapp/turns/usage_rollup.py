"""The usage page's days, kept as data: one `UsageDay` row a day, summed from that day's turn
steps (`TurnStep`, indexed by its start) and handoff records (`handoff_usage.day_handoffs`), so `/admin/usage/` reads at most MAX_DAYS small rows
whatever the steps' number (it read up to 100,000 steps into Python per view: 27.5 s at 10M).

`usage_rollup` (idempotent: a day's row is replaced by its sum) sums again the last
`RECENT_DAYS` days, whose turns may still be running or waiting, and every day of the page's
window that has no row yet; the days before the window's first step and handoff record are
written empty at once. The turn worker's scheduler runs it before each retention round
(GLOVE_RETENTION_SECONDS), so a day is summed before its steps are forgotten and outlives
them; `manage.py usage_rollup --days N` sums N days again by hand (after a change of
GLOVE_MODEL_PRICES nothing need be summed again: cost is priced as the page is read, from the
tokens kept per agent and model).

A day's steps are read once per sum, streamed in chunks, in the background: the bound is one
day's steps, never the window's.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.utils import timezone

from gloveapp.conversations.models import HandoffRecord
from gloveapp.lib.db.batches import stop_if_asked
from gloveapp.turns.handoff_usage import HandoffDay, day_handoffs
from gloveapp.turns.models import Turn, TurnStep, UsageDay

# The days whose turns may still change them (a wait that ends, a retry).
RECENT_DAYS = 2
# The page's longest window, and how long the days are kept (a row a day).
MAX_DAYS = 90
KEEP_DAYS = 400
CHUNK = 2_000


@dataclass
class DaySummary:
    """What the page draws for one day. `usage` is the tokens per agent and model
    ([input, output, cache read, cache write]), priced when the page is read."""

    turns: dict[str, int] = field(default_factory=dict)
    duration_p50: float | None = None
    duration_p95: float | None = None
    queue_p95: float | None = None
    usage: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    tool_failures: dict[str, int] = field(default_factory=dict)
    waiting_minutes: float = 0.0
    # The turns each agent started (first attempts): the handoff rate's denominator.
    agent_turns: dict[str, int] = field(default_factory=dict)
    # The day's handoffs from their audit (`handoff_usage.HandoffDay`).
    handoffs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, data: dict[str, Any]) -> DaySummary:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(fraction * 100) - 1]


def day_bounds(day: date) -> tuple[datetime, datetime]:
    start = timezone.make_aware(datetime.combine(day, datetime.min.time()))
    end = timezone.make_aware(datetime.combine(day + timedelta(days=1), datetime.min.time()))
    return start, end


def day_summarise(day: date) -> tuple[DaySummary, int]:
    """The summary of the steps that started on `day` (local time), and their number."""
    start, end = day_bounds(day)
    steps = (
        TurnStep.objects.filter(started_at__gte=start, started_at__lt=end)
        .order_by()
        .values_list(
            "kind",
            "name",
            "outcome",
            "started_at",
            "duration_ms",
            "attempt",
            "detail",
            "turn__session__agent_name",
            "turn__created_at",
        )
    )
    turns: dict[str, int] = defaultdict(int)
    durations: list[float] = []
    queue_waits: list[float] = []
    usage: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0] * 4))
    tool_failures: dict[str, int] = defaultdict(int)
    agent_turns: dict[str, int] = defaultdict(int)
    waiting = 0.0
    count = 0
    for (
        kind,
        name,
        outcome,
        started_at,
        duration_ms,
        attempt,
        detail,
        agent,
        created,
    ) in steps.iterator(chunk_size=CHUNK):
        count += 1
        if count % CHUNK == 0:
            stop_if_asked()
        if kind == TurnStep.Kind.ATTEMPT:
            if outcome:
                turns[outcome] += 1
            if duration_ms is not None and outcome == Turn.Status.DONE:
                durations.append(duration_ms / 1000)
            if attempt == 1:
                agent_turns[agent or "(none)"] += 1
                if created is not None:
                    queue_waits.append(max((started_at - created).total_seconds(), 0.0))
        elif kind == TurnStep.Kind.MODEL and detail:
            kept = usage[agent or "(none)"][name]
            for index, key in enumerate(
                ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
            ):
                kept[index] += detail.get(key) or 0
        elif kind == TurnStep.Kind.TOOL and outcome == "error":
            tool_failures[name] += 1
        elif kind == TurnStep.Kind.WAIT and duration_ms is not None:
            waiting += duration_ms / 60_000

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    summary = DaySummary(
        turns=dict(turns),
        duration_p50=rounded(percentile(durations, 0.5)),
        duration_p95=rounded(percentile(durations, 0.95)),
        queue_p95=rounded(percentile(queue_waits, 0.95)),
        usage={agent: dict(models) for agent, models in usage.items()},
        tool_failures=dict(tool_failures),
        waiting_minutes=round(waiting, 2),
        agent_turns=dict(agent_turns),
        handoffs=asdict(day_handoffs(start, end)),
    )
    return summary, count


def usage_rollup(*, days: int = RECENT_DAYS, today: date | None = None) -> list[date]:
    """Sum again the last `days` days and every day of the page's window with no row yet;
    forget the rows older than KEEP_DAYS. Returns the days written."""
    today = today or timezone.localdate()
    window = [today - timedelta(days=n) for n in range(max(days, MAX_DAYS))]
    have = set(UsageDay.objects.filter(day__in=window).values_list("day", flat=True))
    wanted = [day for n, day in enumerate(window) if n < days or day not in have]
    # A day before the window's first step and first handoff record holds nothing: those
    # are written empty in one statement (a new database's first round was some 700
    # queries, one sum per empty day).
    first = _first_activity(window[-1])
    empty = {day for day in wanted if day_bounds(day)[1] <= first}
    now = timezone.now()
    nothing = asdict(DaySummary(handoffs=asdict(HandoffDay())))  # what summing them finds
    UsageDay.objects.bulk_create(
        [UsageDay(day=day, summary=nothing, steps=0, computed_at=now) for day in sorted(empty)],
        update_conflicts=True,
        unique_fields=["day"],
        update_fields=["summary", "steps", "computed_at"],
    )
    for day in wanted:
        if day in empty:
            continue
        summary, count = day_summarise(day)
        UsageDay.objects.update_or_create(
            day=day,
            defaults={"summary": asdict(summary), "steps": count, "computed_at": timezone.now()},
        )
    UsageDay.objects.filter(day__lt=today - timedelta(days=KEEP_DAYS)).delete()
    return wanted


def _first_activity(since: date) -> datetime:
    """When the first step or handoff record on or after `since` began (by their time
    indexes), or the end of time when there is none."""
    start = day_bounds(since)[0]
    firsts = [
        TurnStep.objects.filter(started_at__gte=start)
        .order_by("started_at")
        .values_list("started_at", flat=True)
        .first(),
        HandoffRecord.objects.filter(created_at__gte=start)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first(),
    ]
    return min(
        (first for first in firsts if first is not None), default=datetime.max.replace(tzinfo=UTC)
    )
