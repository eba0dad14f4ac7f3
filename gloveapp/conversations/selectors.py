"""Read-side queries of conversations, returning runtime (wire-format) objects.

`DjangoStore` and the REST remote store both read through these, so a remote caller sees
exactly what a local agent would. Writes go through `services`; the inbox's reads are
`inbox.selectors`.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django.db.models import JSONField, QuerySet

from gloveapp.conversations import serialization
from gloveapp.conversations.models import Message, Permission, Session, Task
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import PermissionStatus, TokenUsage
from gloveapp.core.types import Task as CoreTask

_FIELDS = serialization.MESSAGE_VALUES
# Which of them a raw cursor hands over as JSON text.
_JSON_FIELDS = tuple(isinstance(Message._meta.get_field(name), JSONField) for name in _FIELDS)


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


def read_owned_messages(
    session_id: str, *, owner: Any, since_compaction: bool
) -> list[CoreMessage] | None:
    """`read_messages` of the session `owner` holds under `session_id` (their key, see
    `Session`), None if they hold none.

    The hot GET of the remote store: the ownership check and the history are one query (the
    session LEFT JOINed to its messages; a session without messages is one row of NULLs).
    With `since_compaction` the marker probe comes first, bounded by the same check. Raw
    SQL: profiled, building the ORM query and converting its rows cost four times the
    query itself.
    """
    owner_id = getattr(owner, "pk", None)
    if owner_id is None:
        return None
    lower = 0
    with connection.cursor() as cursor:
        if since_compaction:
            cursor.execute(_MARKER_SQL, [owner_id, session_id])
            found = cursor.fetchone()
            if found is None:
                return None
            # A literal bound on the next query (see `read_messages`).
            lower = found[0] or 0
        cursor.execute(_OWNED_MESSAGES_SQL, [lower, owner_id, session_id])
        rows = cursor.fetchall()
    if not rows:
        return None
    return [
        serialization.message_from_values(
            tuple(
                _json(value) if json_column else value
                for value, json_column in zip(row[1:], _JSON_FIELDS, strict=True)
            )
        )
        for row in rows
        if row[0] is not None
    ]


def _json(value: Any) -> Any:
    # A raw cursor hands JSON columns over as text (Django's backends load them that way).
    return json.loads(value) if isinstance(value, str | bytes) else value


_MESSAGE_TABLE = Message._meta.db_table
_SESSION_TABLE = Session._meta.db_table
_OWNED_MESSAGES_SQL = f"""
    SELECT m.seq, {", ".join(f"m.{Message._meta.get_field(name).column}" for name in _FIELDS)}
      FROM {_SESSION_TABLE} s
      LEFT JOIN {_MESSAGE_TABLE} m ON m.session_id = s.id AND m.seq >= %s
     WHERE s.owner_id = %s AND s."key" = %s
     ORDER BY m.seq
"""
_MARKER_SQL = f"""
    SELECT (SELECT max(seq) FROM {_MESSAGE_TABLE} m
             WHERE m.session_id = s.id AND m.is_compaction)
      FROM {_SESSION_TABLE} s
     WHERE s.owner_id = %s AND s."key" = %s
"""


def sessions_owned_by(owner: Any) -> QuerySet[Session]:
    """The sessions `owner` owns, newest first: the API's list and the pages' chat list.
    Ties go by the owner's own ids, never by the global ones they must not see."""
    return Session.objects.filter(owner=owner).order_by("-created_at", "-key")


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
