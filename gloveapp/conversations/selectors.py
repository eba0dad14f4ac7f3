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
# `_wire_from_row` reads its rows by these positions.
assert _FIELDS[:3] == ("sender", "msg_id", "text") and _FIELDS[6:10] == (
    "is_compaction",
    "is_skill_injection",
    "framework_context",
    "reasoning_content",
)
# Which of them a raw cursor hands over as JSON text.
_JSON_FIELDS = tuple(isinstance(Message._meta.get_field(name), JSONField) for name in _FIELDS)


def read_messages(session_id: str, *, since_compaction: bool) -> list[CoreMessage]:
    """The session's history; with `since_compaction`, from its last compaction marker on.

    Raw SQL, as `read_owned_messages`: every turn reads its context through here, and
    building the ORM queries cost more than the database answering them (profiled).
    """
    lower = 0
    with connection.cursor() as cursor:
        if since_compaction:
            # Two statements on purpose: with the marker's seq as a literal the planner scans
            # only the (session, seq) range; folded into one statement as a subquery,
            # PostgreSQL cannot estimate the bound and filters the whole history instead.
            # The probe is one step down the partial `message_compaction_idx` index.
            cursor.execute(_LAST_MARKER_SQL, [session_id])
            found = cursor.fetchone()
            if found is not None:
                lower = found[0]
        cursor.execute(_MESSAGES_SQL, [session_id, lower])
        rows = cursor.fetchall()
    return [_message_from_row(row) for row in rows]


def _message_from_row(row: tuple[Any, ...]) -> CoreMessage:
    return serialization.message_from_values(
        tuple(
            _json(value) if json_column else value
            for value, json_column in zip(row, _JSON_FIELDS, strict=True)
        )
    )


def read_owned_messages(
    session_id: str, *, owner: Any, since_compaction: bool, wire: bool = False
) -> list[Any] | None:
    """`read_messages` of the session `owner` holds under `session_id` (their key, see
    `Session`), None if they hold none.

    The hot GET of the remote store: the ownership check and the history are one query (the
    session LEFT JOINed to its messages; a session without messages is one row of NULLs).
    With `since_compaction` the marker probe comes first, bounded by the same check. Raw
    SQL: profiled, building the ORM query and converting its rows cost four times the
    query itself. With `wire`, the messages come as their wire dicts (`Message.to_dict()`,
    what the REST GET sends): a plain text row (no content, tool calls, tool results or
    unknown fields: most of a history) becomes its dict directly, without a runtime
    `Message` in between (that conversion was most of a GET's time).
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
    convert = _wire_from_row if wire else _message_from_row
    # row[0] is the seq: None on the LEFT JOIN's row of a session without messages.
    return [convert(row[1:]) for row in rows if row[0] is not None]


# content, tool_calls, tool_results, extra: all NULL in a plain text row.
_NOT_PLAIN = tuple(
    _FIELDS.index(name) for name in ("content", "tool_calls", "tool_results", "extra")
)


def _wire_from_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """`_message_from_row(row).to_dict()`, directly for a plain text row."""
    if any(row[index] is not None for index in _NOT_PLAIN):
        return _message_from_row(row).to_dict()
    sender, msg_id, text = row[:3]
    is_compaction, is_skill_injection, framework_context, reasoning_content = row[6:10]
    wire: dict[str, Any] = {"sender": sender}  # `Message.to_dict()`'s keys, in its order
    if msg_id is not None:
        wire["id"] = msg_id
    wire["text"] = text
    if is_compaction:
        wire["is_compaction"] = True
    if is_skill_injection:
        wire["is_skill_injection"] = True
    if framework_context is not None:
        wire["framework_context"] = framework_context
    if reasoning_content is not None:
        wire["reasoning_content"] = reasoning_content
    return wire


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
_COLUMNS = ", ".join(f'"{Message._meta.get_field(name).column}"' for name in _FIELDS)
_MESSAGES_SQL = (
    f'SELECT {_COLUMNS} FROM "{_MESSAGE_TABLE}" WHERE "session_id" = %s AND "seq" >= %s'
    ' ORDER BY "seq"'
)
_LAST_MARKER_SQL = (
    f'SELECT "seq" FROM "{_MESSAGE_TABLE}" WHERE "session_id" = %s AND "is_compaction"'
    ' ORDER BY "seq" DESC LIMIT 1'
)
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


_COUNTER_SQL = {
    name: f"SELECT {name} FROM {_SESSION_TABLE} WHERE id = %s"
    for name in ("token_count", "turn_count")
}


def read_counter(session_id: str, field: str) -> int:
    """`token_count` or `turn_count` of the session (0 when it does not exist yet)."""
    sql = _COUNTER_SQL.get(field)
    if sql is None:  # any other column: the ORM names it safely
        value = Session.objects.filter(pk=session_id).values_list(field, flat=True).first()
        return value or 0
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id])
        row = cursor.fetchone()
    return (row[0] if row else 0) or 0


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
