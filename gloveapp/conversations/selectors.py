"""Read-side queries of conversations, returning runtime (wire-format) objects.

`DjangoStore` and the REST remote store both read through these, so a remote caller sees
exactly what a local agent would. Writes go through `services`; the inbox's reads are
`inbox.selectors`.
"""

from __future__ import annotations

from gloveapp.conversations import serialization
from gloveapp.conversations.models import Message, Permission, Session, Task
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import PermissionStatus, TokenUsage
from gloveapp.core.types import Task as CoreTask


def read_messages(session_id: str, *, since_compaction: bool) -> list[CoreMessage]:
    rows = Message.objects.filter(session_id=session_id)
    if since_compaction:
        # Two statements on purpose: with the marker's seq as a literal the planner scans
        # only the (session, seq) range; folded into one statement as a subquery, PostgreSQL
        # cannot estimate the bound and filters the whole history instead.
        last_marker = (
            Message.objects.filter(session_id=session_id, is_compaction=True)
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        if last_marker is not None:
            rows = rows.filter(seq__gte=last_marker)
    # values_list, not model instances: a 100k-message history is read often.
    values = rows.order_by("seq").values_list(*serialization.MESSAGE_VALUES)
    return [serialization.message_from_values(row) for row in values]


def read_counter(session_id: str, field: str) -> int:
    value = Session.objects.filter(pk=session_id).values_list(field, flat=True).first()
    return value or 0


def read_token_consumption(session_id: str) -> TokenUsage:
    """The session's totals as Glove's `TokenConsumptionCounter` (never reset by compaction)."""
    row = (
        Session.objects.filter(pk=session_id)
        .values(
            "tokens_in_total",
            "tokens_out_total",
            "cache_creation_input_tokens_total",
            "cache_read_input_tokens_total",
        )
        .first()
    ) or {}
    return TokenUsage(
        tokens_in=row.get("tokens_in_total", 0),
        tokens_out=row.get("tokens_out_total", 0),
        cache_creation_input_tokens=row.get("cache_creation_input_tokens_total", 0),
        cache_read_input_tokens=row.get("cache_read_input_tokens_total", 0),
    )


def read_tasks(session_id: str) -> list[CoreTask]:
    rows = Task.objects.filter(session_id=session_id).order_by("position", "pk")
    return [serialization.task_to_core(row) for row in rows]


def read_permission(session_id: str, key: str) -> PermissionStatus:
    status = (
        Permission.objects.filter(session_id=session_id, key=key)
        .values_list("status", flat=True)
        .first()
    )
    return status or "unset"  # type: ignore[return-value]
