"""What turns cost: their stored token usage, priced by GLOVE_MODEL_PRICES, per turn, session,
user and agent. A model without a price makes a cost unknown (named), never 0."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Sum

from gloveapp.agents.config import model_prices
from gloveapp.conversations.models import Session
from gloveapp.observe.cost import Cost, Usage, total_cost
from gloveapp.turns.models import SessionUsage, Turn

# Tokens a session counted that no turn recorded with its model (a remote client's loop).
UNRECORDED_MODEL = "(model not recorded)"
_USAGE_SUMS = {
    "tokens_in": Sum("tokens_in"),
    "tokens_out": Sum("tokens_out"),
    "cache_read": Sum("cache_read_tokens"),
    "cache_write": Sum("cache_write_tokens"),
}


def _usage(row: dict[str, Any]) -> Usage:
    return Usage(
        tokens_in=row["tokens_in"] or 0,
        tokens_out=row["tokens_out"] or 0,
        cache_read=row["cache_read"] or 0,
        cache_write=row["cache_write"] or 0,
    )


def turn_cost(turn: Turn) -> Cost:
    """One turn's cost: the usage its finishing attempt stored, priced."""
    usage = Usage(turn.tokens_in, turn.tokens_out, turn.cache_read_tokens, turn.cache_write_tokens)
    return total_cost([(turn.model, usage)], model_prices())


def session_usage_cost(session: Session) -> Cost:
    """A session's cost: its turns' usage by model, priced. Tokens the session counted that
    no turn recorded (a remote client's own loop, a turn whose worker died) are of a model
    nobody stored: their cost is said to be unknown. (A server's turns count each reply's
    tokens on their model as they store it: `turn_store`.)"""
    if not (session.tokens_in_total or session.tokens_out_total):
        return Cost()  # nothing used yet: no read of its turns
    # A row per model the session's turns used (kept by `turn_finish`), not its turns.
    rows = [
        (
            row.model,
            Usage(row.tokens_in, row.tokens_out, row.cache_read_tokens, row.cache_write_tokens),
        )
        for row in SessionUsage.objects.filter(session_id=session.pk).order_by("model")
    ]
    recorded = sum((usage for _, usage in rows), Usage())
    unrecorded = Usage(
        tokens_in=max(session.tokens_in_total - recorded.tokens_in, 0),
        tokens_out=max(session.tokens_out_total - recorded.tokens_out, 0),
    )
    if not unrecorded.empty:
        rows.append((UNRECORDED_MODEL, unrecorded))
    return total_cost(rows, model_prices())


def costs_by(key: str, *, since: datetime, until: datetime | None = None) -> dict[Any, Cost]:
    """Cost per `key` ("user", "agent") of the turns that finished in [since, until)."""
    field = {"user": "user__username", "agent": "session__agent_name"}[key]
    turns = Turn.objects.filter(finished_at__gte=since)
    if until is not None:
        turns = turns.filter(finished_at__lt=until)
    grouped: dict[Any, list[tuple[str, Usage]]] = {}
    for row in turns.values(field, "model").annotate(**_USAGE_SUMS).order_by(field, "model"):
        grouped.setdefault(row[field], []).append((row["model"], _usage(row)))
    prices = model_prices()
    return {name: total_cost(rows, prices) for name, rows in grouped.items()}
