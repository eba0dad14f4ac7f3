"""The admin's usage page: what a staff member reads at a glance, per day over a window.

Turns per day (by how they ended), p50/p95 turn duration, tokens and cost per agent, tool
failures, time waiting on a person and time in the queue, all read from the turn timeline
(`TurnStep`, indexed by its start and kept GLOVE_RETAIN_TURN_STEPS_DAYS), plus the queue
depth now. One bounded read: at most `MAX_STEPS` steps, the newest; the page says when the
window held more. The charts are drawn by Chart.js, vendored (gloveapp/static/vendor).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from gloveapp.agents.config import model_prices
from gloveapp.observe.cost import Usage, cost_of, price_for
from gloveapp.turns.models import Turn, TurnStep

MAX_STEPS = 100_000
MAX_DAYS = 90


@dataclass
class UsageReport:
    days: list[str]
    charts: dict[str, Any] = field(default_factory=dict)
    queued_now: int = 0
    running_now: int = 0
    truncated: bool = False
    unpriced_models: list[str] = field(default_factory=list)


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(fraction * 100) - 1]


def usage_report(*, days: int = 14) -> UsageReport:
    days = max(1, min(days, MAX_DAYS))
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    since = timezone.make_aware(datetime.combine(first, datetime.min.time()))
    labels = [(first + timedelta(days=n)).isoformat() for n in range(days)]
    rows = list(
        TurnStep.objects.filter(started_at__gte=since)
        .order_by("-started_at")
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
        )[: MAX_STEPS + 1]
    )
    truncated = len(rows) > MAX_STEPS
    rows = rows[:MAX_STEPS]

    turns: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    durations: dict[str, list[float]] = defaultdict(list)
    queue_waits: dict[str, list[float]] = defaultdict(list)
    tokens: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cost: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    tool_failures: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    waiting: dict[str, float] = defaultdict(float)
    unpriced: set[str] = set()
    prices = model_prices()
    for kind, name, outcome, started_at, duration_ms, attempt, detail, agent, created in rows:
        day = timezone.localtime(started_at).date().isoformat()
        agent = agent or "(none)"
        if kind == TurnStep.Kind.ATTEMPT:
            if outcome:
                turns[outcome][day] += 1
            if duration_ms is not None and outcome == Turn.Status.DONE:
                durations[day].append(duration_ms / 1000)
            if attempt == 1 and created is not None:
                queue_waits[day].append(max((started_at - created).total_seconds(), 0.0))
        elif kind == TurnStep.Kind.MODEL and detail:
            usage = Usage(
                tokens_in=detail.get("input_tokens") or 0,
                tokens_out=detail.get("output_tokens") or 0,
                cache_read=detail.get("cache_read_tokens") or 0,
                cache_write=detail.get("cache_write_tokens") or 0,
            )
            tokens[agent][day] += usage.tokens_in + usage.tokens_out
            price = price_for(name, prices)
            if price is None:
                if not usage.empty:
                    unpriced.add(name)
            else:
                cost[agent][day] += cost_of(usage, price)
        elif kind == TurnStep.Kind.TOOL and outcome == "error":
            tool_failures[name][day] += 1
        elif kind == TurnStep.Kind.WAIT and duration_ms is not None:
            waiting[day] += duration_ms / 60_000

    def series(per_day: dict[str, Any], cast=float) -> list[Any]:
        return [cast(per_day.get(day, 0)) for day in labels]

    def quantile_series(values: dict[str, list[float]], fraction: float) -> list[Any]:
        out = []
        for day in labels:
            found = _percentile(values.get(day, []), fraction)
            out.append(None if found is None else round(found, 3))
        return out

    charts = {
        "turns": {
            "title": "Turns per day",
            "type": "bar",
            "stacked": True,
            "unit": "turns",
            "datasets": [
                {"label": status, "data": series(turns[status], int)}
                for status in ("done", "failed", "cancelled")
                if status in turns
            ],
        },
        "duration": {
            "title": "Turn duration (s), p50 and p95",
            "type": "line",
            "unit": "s",
            "datasets": [
                {"label": "p50", "data": quantile_series(durations, 0.5)},
                {"label": "p95", "data": quantile_series(durations, 0.95)},
            ],
        },
        "tokens": {
            "title": "Tokens per agent per day",
            "type": "bar",
            "stacked": True,
            "unit": "tokens",
            "datasets": [
                {"label": agent, "data": series(per_day, int)}
                for agent, per_day in sorted(tokens.items())
            ],
        },
        "cost": {
            "title": "Cost per agent per day (US $)",
            "type": "bar",
            "stacked": True,
            "unit": "$",
            "datasets": [
                {"label": agent, "data": [round(float(v), 6) for v in series(per_day, Decimal)]}
                for agent, per_day in sorted(cost.items())
            ],
        },
        "tool_failures": {
            "title": "Tool failures per day",
            "type": "bar",
            "stacked": True,
            "unit": "calls",
            "datasets": [
                {"label": tool, "data": series(per_day, int)}
                for tool, per_day in sorted(tool_failures.items())
            ],
        },
        "waiting": {
            "title": "Time waiting on a person (minutes per day)",
            "type": "bar",
            "unit": "min",
            "datasets": [{"label": "waiting", "data": [round(v, 2) for v in series(waiting)]}],
        },
        "queue": {
            "title": "Time in the queue (s), p95",
            "type": "line",
            "unit": "s",
            "datasets": [{"label": "p95", "data": quantile_series(queue_waits, 0.95)}],
        },
    }
    live = Turn.objects.filter(status__in=(Turn.Status.QUEUED, Turn.Status.RUNNING))
    return UsageReport(
        days=labels,
        charts=charts,
        queued_now=live.filter(status=Turn.Status.QUEUED).count(),
        running_now=live.filter(status=Turn.Status.RUNNING).count(),
        truncated=truncated,
        unpriced_models=sorted(unpriced),
    )


def report_days(raw: str) -> int:
    return int(raw) if raw.isdigit() and 0 < int(raw) <= MAX_DAYS else 14
