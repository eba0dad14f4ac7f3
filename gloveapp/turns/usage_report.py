"""The admin's usage page: what a staff member reads at a glance, per day over a window.

Turns per day (by how they ended), p50/p95 turn duration, tokens and cost per agent, tool
failures, time waiting on a person and time in the queue, read from the days' summaries
(`UsageDay`, kept by `turns.usage_rollup` from the turn timeline): at most MAX_DAYS rows,
whatever the steps' number, among them the handoffs' figures (`handoff_usage`: time to a
person, handoff rate per agent, hand-backs); plus the queue depth now. Cost is priced here, from the tokens
kept per agent and model, so a change of GLOVE_MODEL_PRICES shows at once. The charts are
drawn by Chart.js, vendored (gloveapp/static/vendor).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from gloveapp.agents.config import model_prices
from gloveapp.observe.cost import Usage, cost_of, price_for
from gloveapp.turns.handoff_usage import HandoffDay, handoff_usage
from gloveapp.turns.models import Turn, UsageDay
from gloveapp.turns.usage_rollup import MAX_DAYS, DaySummary


@dataclass
class UsageReport:
    days: list[str]
    charts: dict[str, Any] = field(default_factory=dict)
    queued_now: int = 0
    running_now: int = 0
    waiting_now: int = 0  # parked on a person (an approval, a prompt): no worker holds them
    # Days of the window not summed yet (a worker's scheduler, or `manage.py usage_rollup`).
    missing_days: int = 0
    summed_at: datetime | None = None
    unpriced_models: list[str] = field(default_factory=list)
    # Time to a person, handoff rate per agent, hand-backs (`handoff_usage`).
    handoffs: dict[str, Any] = field(default_factory=dict)


def usage_report(*, days: int = 14) -> UsageReport:
    days = max(1, min(days, MAX_DAYS))
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    labels = [(first + timedelta(days=n)).isoformat() for n in range(days)]
    rows = {
        row.day.isoformat(): row
        for row in UsageDay.objects.filter(day__gte=first, day__lte=today).only(
            "day", "summary", "computed_at"
        )
    }

    turns: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    durations: dict[str, dict[str, float | None]] = {"p50": {}, "p95": {}}
    queue_p95: dict[str, float | None] = {}
    tokens: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cost: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    tool_failures: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    waiting: dict[str, float] = defaultdict(float)
    agent_turns: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    handoff_days: dict[str, HandoffDay] = {}
    unpriced: set[str] = set()
    prices = model_prices()
    for day, row in rows.items():
        summary = DaySummary.of(row.summary)
        for outcome, count in summary.turns.items():
            turns[outcome][day] += count
        durations["p50"][day] = summary.duration_p50
        durations["p95"][day] = summary.duration_p95
        queue_p95[day] = summary.queue_p95
        for agent, per_model in summary.usage.items():
            for model, (tokens_in, tokens_out, cache_read, cache_write) in per_model.items():
                usage = Usage(
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                    cache_read=cache_read,
                    cache_write=cache_write,
                )
                tokens[agent][day] += usage.tokens_in + usage.tokens_out
                price = price_for(model, prices)
                if price is None:
                    if not usage.empty:
                        unpriced.add(model)
                else:
                    cost[agent][day] += cost_of(usage, price)
        for tool, count in summary.tool_failures.items():
            tool_failures[tool][day] += count
        waiting[day] += summary.waiting_minutes
        for agent, count in summary.agent_turns.items():
            agent_turns[agent][day] += count
        handoff_days[day] = HandoffDay.of(summary.handoffs)

    def series(per_day: dict[str, Any], cast=float) -> list[Any]:
        return [cast(per_day.get(day, 0)) for day in labels]

    def kept_series(per_day: dict[str, float | None]) -> list[float | None]:
        return [per_day.get(day) for day in labels]

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
                {"label": "p50", "data": kept_series(durations["p50"])},
                {"label": "p95", "data": kept_series(durations["p95"])},
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
            "datasets": [{"label": "p95", "data": kept_series(queue_p95)}],
        },
    }
    handoffs = handoff_usage(days=labels, summaries=handoff_days, agent_turns=agent_turns)
    charts.update(handoffs.charts)
    live = Turn.objects.filter(
        status__in=(Turn.Status.QUEUED, Turn.Status.RUNNING, Turn.Status.WAITING)
    )
    return UsageReport(
        days=labels,
        charts=charts,
        queued_now=live.filter(status=Turn.Status.QUEUED).count(),
        running_now=live.filter(status=Turn.Status.RUNNING).count(),
        waiting_now=live.filter(status=Turn.Status.WAITING).count(),
        missing_days=days - len(rows),
        summed_at=max((row.computed_at for row in rows.values()), default=None),
        unpriced_models=sorted(unpriced),
        handoffs=handoffs.summary,
    )


def report_days(raw: str) -> int:
    return int(raw) if raw.isdigit() and 0 < int(raw) <= MAX_DAYS else 14
