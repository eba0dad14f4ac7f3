"""The append of messages to an existing session, as few statements as the database allows.

`messages_append` is the hottest write (every turn, every POST of the remote store). The ORM
version took nine statements and two locks per call; under one session's row lock the
database could commit only ~500 of them a second. Here:

- the session row is locked, stamped and handed its next `seq` numbers by one UPDATE ...
  RETURNING (the numbers live in `Session.last_seq`, so no max(seq) read);
- on PostgreSQL the stream's advisory lock (the live event log's per-stream commit order,
  `outbox.before_event_insert`) is taken in that same statement, after the row lock, the
  order every other writer of a session stream uses; the NOTIFY that wakes relays without
  Redis rides along too;
- the messages and their `message.appended` events are inserted by the same statement
  (data-modifying CTEs), the events numbered in their stream by its counter row
  (`LiveStreamCounter`, advanced there too, after the stream's lock), so outside a transaction the whole append is ONE round trip and
  its own commit, and the locks are held only while the server runs it.

The guarantees stay those of the ORM version: all or nothing, `seq` continues the history
under the session lock, events commit in per-stream order with the change, a deleted
session is refused (the caller's slow path raises `SessionGone`), and a missing session
is left to the caller (which creates it). SQLite has no data-modifying CTEs, and needs none:
its IMMEDIATE transactions already serialise writers, so there the same steps run as three
statements in the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from gloveapp.conversations import serialization
from gloveapp.conversations.group_append import append_grouped
from gloveapp.conversations.models import Message, Session, is_person_message
from gloveapp.lib.db.prepared import prepared_cursor, sql_datetime
from gloveapp.live.eventlog import LIVE_EVENTS_CHANNEL, record_events
from gloveapp.live.models import LiveEvent, LiveStreamCounter
from gloveapp.live.outbox import notify_committed, stream_lock_key
from gloveapp.live.streams import session_stream

_JSON_COLUMNS = ("content", "tool_calls", "tool_results", "extra")
_TEXT_COLUMNS = ("sender", "msg_id", "text", "framework_context", "reasoning_content")
_BOOL_COLUMNS = ("is_compaction", "is_skill_injection")
TITLE_LENGTH = 60


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append stored of one message: its row and its place in the history (model
    instances cost more to build than the statement took to run)."""

    id: int
    seq: int


@dataclass(frozen=True, slots=True)
class Fence:
    """A condition the append itself checks, in its own statement (PostgreSQL) or its own
    transaction (SQLite): a SQL boolean with `%s` placeholders, and their values. A turn's
    writes carry one (`turns.fence.turn_fence`: the turn is still this worker's), so a
    worker that lost its turn stores nothing more. Nobody else pays for it."""

    condition: str
    params: tuple[Any, ...]


class FencedOff(Exception):
    """A fenced write found its fence closed: nothing was written."""


def chat_title(fields: list[dict[str, Any]]) -> str:
    """The title an untitled chat takes from these messages: the first a person sent."""
    for values in fields:
        if is_person_message(values):
            line = " ".join(values["text"].split())
            return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"
    return ""


def person_messages(fields: list[dict[str, Any]]) -> int:
    """How many of these messages a person sent (`Session.person_message_count` grows by it
    in the append's own statement)."""
    return sum(1 for values in fields if is_person_message(values))


def append_to_existing(
    *,
    session_id: str,
    fields: list[dict[str, Any]],
    on_titled: Callable[[], None] | None = None,
    usage: tuple[int, int, int, int] | None = None,
    counted: dict[str, Any] | None = None,
    owned_by: tuple[Any, str] | None = None,
    fence: Fence | None = None,
) -> list[Appended] | None:
    """Append validated `fields` (one dict per message); None if the session row is missing,
    or with `owned_by` (owner id, key) if the row is not that owner's session of that key,
    or with `fence` if its condition is false (nothing written either way).

    With `usage` (PostgreSQL outside a transaction only: `record_turn`'s one-statement
    path) the same statement adds the usage and one turn and announces the counters; the
    session's title, agent_name, token_count and turn_count after it go into `counted`.

    Outside a transaction on PostgreSQL this is one autocommitted statement, shared with the
    concurrent appends to the same session in this process (`group_append`); inside one
    (or on SQLite) it joins the caller's transaction. An untitled session takes its title
    from the first message a person sent, in the same statement; `on_titled` then runs
    after commit (to announce it).
    """
    now = timezone.now()
    # What the rows read back as: their events carry it, and each row keeps its text, so a
    # GET joins texts instead of rebuilding messages.
    wires = [serialization.wire_json(serialization.wire_from_fields(values)) for values in fields]
    if usage is not None:
        if connection.vendor != "postgresql" or connection.in_atomic_block:
            raise ValueError("usage is recorded with an append only on PostgreSQL, autocommitted")
        early = settings.GLOVE_EARLY_LOCK_RELEASE
        rows = _append_postgresql(
            session_id,
            fields,
            wires,
            now,
            on_titled,
            usage=usage,
            counted=counted,
            early_release=early,
            owned_by=owned_by,
            fence=fence,
        )
        if early and rows is not None:
            wait_until_durable()
        return rows
    if connection.vendor == "postgresql":
        if connection.in_atomic_block:  # the rows must commit with the caller's transaction
            return _append_postgresql(
                session_id, fields, wires, now, on_titled, owned_by=owned_by, fence=fence
            )
        early = settings.GLOVE_EARLY_LOCK_RELEASE
        return append_grouped(
            session_id,
            fields,
            wires,
            lambda group_fields, group_wires: _append_postgresql(
                session_id,
                group_fields,
                group_wires,
                now,
                on_titled,
                early_release=early,
                owned_by=owned_by,
                fence=fence,
            ),
            settle=wait_until_durable if early else None,
            batch_key=(session_id, owned_by, fence),
        )
    with transaction.atomic():
        return _append_stepwise(
            session_id, fields, wires, now, on_titled, owned_by=owned_by, fence=fence
        )


def postgresql_statement(
    session_id: str,
    fields: list[dict[str, Any]],
    wires: list[str],
    now: Any,
    usage: tuple[int, int, int, int] | None = None,
    *,
    early_release: bool = False,
    owned_by: tuple[Any, str] | None = None,
    fence: Fence | None = None,
) -> tuple[str, dict[str, Any]]:
    """The append's one statement and its parameters (bench/rest.py hands it to pgbench).

    With `usage` (tokens in, out, cache writes, cache reads) it is a model reply's whole
    record (`record_turn`): the same row update also adds the usage and one turn, and a
    `session.updated` event announcing the new counters follows the messages' events.
    """
    stream = session_stream(session_id)
    rows = []
    for offset, (values, wire) in enumerate(zip(fields, wires, strict=True), start=1):
        # Absent keys become SQL NULL in jsonb_to_recordset (a JSON null would not, for jsonb).
        row = {name: value for name, value in values.items() if value is not None}
        row["ord"] = offset
        row["wire"] = wire
        rows.append(row)
    session_table = Session._meta.db_table
    message_table = Message._meta.db_table
    event_table = LiveEvent._meta.db_table
    counter_table = LiveStreamCounter._meta.db_table
    columns = ", ".join(
        [f"{name} text" for name in _TEXT_COLUMNS]
        + [f"{name} jsonb" for name in _JSON_COLUMNS]
        + [f"{name} boolean" for name in _BOOL_COLUMNS]
        + ["agent_version_id bigint", "ord integer", "wire text"]
    )
    # Relays LISTEN only when there is no Redis to wake them; NOTIFY also serialises every
    # committing transaction on a global lock, so it is left out when it has no listener.
    guard = ' AND t.owner_id = %(owner_id)s AND t."key" = %(key)s' if owned_by else ""
    if fence is not None:
        names = tuple(f"%(fence_{index})s" for index in range(len(fence.params)))
        guard += f" AND {fence.condition % names}"
    notify = "" if settings.REDIS_URL else ", pg_notify(%(channel)s, %(stream)s) AS notified"
    if early_release:
        # Commit without waiting for the disk, so the locks go as soon as the rows are
        # written; the caller then waits for the disk outside them (`wait_until_durable`).
        notify += ", set_config('synchronous_commit', 'off', true) AS early"
    counters = events = session_columns = final_columns = ""
    if usage is not None:
        counters = """,
                   token_count = t.token_count + %(tokens_in)s + %(tokens_out)s,
                   tokens_in_total = t.tokens_in_total + %(tokens_in)s,
                   tokens_out_total = t.tokens_out_total + %(tokens_out)s,
                   cache_creation_input_tokens_total
                       = t.cache_creation_input_tokens_total + %(cache_creation)s,
                   cache_read_input_tokens_total
                       = t.cache_read_input_tokens_total + %(cache_read)s,
                   turn_count = t.turn_count + 1"""
        session_columns = (
            ', t."key" AS session_key, t.title AS now_title, t.agent_name, t.token_count,'
            " t.turn_count"
        )
        final_columns = ", s.now_title, s.agent_name, s.token_count, s.turn_count, s.session_key"
        events = """
            UNION ALL
            SELECT %(count)s::integer + 1, 'session.updated', jsonb_build_object('session', jsonb_build_object(
                       'id', s.session_key, 'title', s.now_title,
                       'agent_name', s.agent_name, 'token_count', s.token_count,
                       'turn_count', s.turn_count))
              FROM s"""
    sql = f"""
        WITH s AS (
            UPDATE {session_table} t
               SET updated_at = %(now)s, last_seq = t.last_seq + %(count)s,
                   person_message_count = t.person_message_count + %(people)s,
                   title = CASE WHEN t.title = '' THEN %(title)s ELSE t.title END{counters}
              FROM (SELECT title FROM {session_table} WHERE id = %(session_id)s FOR UPDATE) old
             WHERE t.id = %(session_id)s{guard}
            RETURNING t.last_seq - %(count)s AS base, old.title = '' AS titled{session_columns},
                      pg_advisory_xact_lock(%(lock_key)s) AS locked{notify}
        ), r AS (
            SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS x({columns})
        ), m AS (
            INSERT INTO {message_table}
                (session_id, seq, sender, msg_id, text, content, tool_calls, tool_results,
                 is_compaction, is_skill_injection, framework_context, reasoning_content,
                 extra, agent_version_id, wire, created_at)
            SELECT %(session_id)s, s.base + r.ord, r.sender, r.msg_id, COALESCE(r.text, ''),
                   r.content, r.tool_calls, r.tool_results, r.is_compaction,
                   r.is_skill_injection, r.framework_context, r.reasoning_content, r.extra,
                   r.agent_version_id, r.wire, %(now)s
              FROM s, r
             ORDER BY r.ord
            RETURNING id, seq
        ), c AS (
            INSERT INTO {counter_table} (stream, last_seq)
            SELECT %(stream)s, %(events)s::bigint FROM s
            ON CONFLICT (stream) DO UPDATE
               SET last_seq = {counter_table}.last_seq + EXCLUDED.last_seq
            RETURNING last_seq - %(events)s::bigint AS base
        ), e AS (
            INSERT INTO {event_table} (stream, seq, type, payload, created_at)
            SELECT %(stream)s, c.base + x.ord, x.type, x.payload, %(now)s FROM c, (
            SELECT r.ord, 'message.appended' AS type,
                   jsonb_build_object('seq', s.base + r.ord, 'message', r.wire::jsonb) AS payload
              FROM s, r{events}
            ) x
             ORDER BY x.ord
            RETURNING id
        )
        SELECT m.id, m.seq, (SELECT count(*) FROM e), s.titled{final_columns}
          FROM m, s ORDER BY m.seq
    """
    params = {
        "now": now,
        "count": len(rows),
        # The stream's numbers this append takes: its messages' events, and with `usage`
        # the `session.updated` after them.
        "events": len(rows) + (1 if usage is not None else 0),
        "session_id": session_id,
        "lock_key": stream_lock_key(stream),
        "channel": LIVE_EVENTS_CHANNEL,
        "stream": stream,
        "rows": json.dumps(rows),
        "title": chat_title(fields),
        "people": person_messages(fields),
    }
    if usage is not None:
        params.update(
            zip(("tokens_in", "tokens_out", "cache_creation", "cache_read"), usage, strict=True)
        )
    if owned_by:
        params["owner_id"], params["key"] = owned_by
    if fence is not None:
        params.update((f"fence_{index}", value) for index, value in enumerate(fence.params))
    return sql, params


def fence_holds(fence: Fence) -> bool:
    """Whether the fence is open, read in the caller's transaction (on SQLite, whose
    IMMEDIATE transactions hold the write lock, nothing can close it before the commit)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 WHERE {fence.condition}", list(fence.params))
        return cursor.fetchone() is not None


def wait_until_durable() -> None:
    """Return once everything this process committed is on disk (PostgreSQL).

    An append with early lock release commits without waiting for its WAL flush, so a
    session's next append need not wait for this one's flush. It is answered only after
    this: a transaction given an id commits with the usual `synchronous_commit`, which
    flushes the WAL up to its commit record, the append's included (the WAL is one
    sequence). Concurrent waits share flushes (PostgreSQL's own group commit).
    """
    with prepared_cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()")


def _titled(candidate: str, was_untitled: bool, on_titled: Callable[[], None] | None) -> None:
    # This append named the session: it was untitled when the append locked it. (Comparing
    # the new title with the candidate instead announced the title again on every append
    # whose first person message repeated it: an event and a commit more per request.)
    # Outside a transaction the statement has committed already and this runs at once.
    if on_titled is not None and candidate and was_untitled:
        transaction.on_commit(on_titled, robust=True)


def _append_postgresql(
    session_id: str,
    fields: list[dict[str, Any]],
    wires: list[str],
    now: Any,
    on_titled: Callable[[], None] | None = None,
    *,
    usage: tuple[int, int, int, int] | None = None,
    counted: dict[str, Any] | None = None,
    early_release: bool = False,
    owned_by: tuple[Any, str] | None = None,
    fence: Fence | None = None,
) -> list[Appended] | None:
    sql, params = postgresql_statement(
        session_id,
        fields,
        wires,
        now,
        usage=usage,
        early_release=early_release,
        owned_by=owned_by,
        fence=fence,
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.fetchall()
    if not inserted:
        return None
    transaction.on_commit(notify_committed, robust=True)
    _titled(params["title"], inserted[0][3], on_titled)
    if usage is not None and counted is not None:
        counted.update(
            zip(
                ("title", "agent_name", "token_count", "turn_count", "key"),
                inserted[0][4:9],
                strict=True,
            )
        )
    return [Appended(pk, seq) for pk, seq, *_ in inserted]


def _append_stepwise(
    session_id: str,
    fields: list[dict[str, Any]],
    wires: list[str],
    now: Any,
    on_titled: Callable[[], None] | None = None,
    *,
    owned_by: tuple[Any, str] | None = None,
    fence: Fence | None = None,
) -> list[Appended] | None:
    candidate = chat_title(fields)
    table = Session._meta.db_table
    guard = ' AND owner_id = %s AND "key" = %s' if owned_by else ""
    if fence is not None and not fence_holds(fence):
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET updated_at = %s, last_seq = last_seq + %s,"
            " person_message_count = person_message_count + %s"
            f" WHERE id = %s{guard} RETURNING last_seq, title",
            [
                sql_datetime(now),
                len(fields),
                person_messages(fields),
                session_id,
                *(owned_by or ()),
            ],
        )
        found = cursor.fetchone()
        if found is None:
            return None
        # The IMMEDIATE transaction holds SQLite's write lock, so the title just read is
        # still the title (SQLite's RETURNING sees only the new row: it cannot tell whether
        # a CASE in the UPDATE named the chat).
        was_untitled = bool(candidate) and found[1] == ""
        if was_untitled:
            cursor.execute(f"UPDATE {table} SET title = %s WHERE id = %s", [candidate, session_id])
    _titled(candidate, was_untitled, on_titled)
    start = found[0] - len(fields) + 1
    rows = _insert_messages(session_id, start, fields, wires, now)
    record_events(
        stream=session_stream(session_id),
        events=[
            ("message.appended", {"seq": row.seq, "message": json.loads(wire)})
            for row, wire in zip(rows, wires, strict=True)
        ],
    )
    return rows


_MESSAGE_COLUMNS = (
    "session_id",
    "seq",
    *_TEXT_COLUMNS,
    *_JSON_COLUMNS,
    *_BOOL_COLUMNS,
    "agent_version",
    "wire",
    "created_at",
)
_MESSAGE_FIELDS = [Message._meta.get_field(name) for name in _MESSAGE_COLUMNS]
_INSERT_BATCH = 50  # rows per INSERT (18 parameters each: within every backend's limit)


def _insert_messages(
    session_id: str, start: int, fields: list[dict[str, Any]], wires: list[str], now: Any
) -> list[Appended]:
    """The rows `Message.objects.bulk_create` would write, by a plain INSERT ... RETURNING
    (compiling the ORM's insert cost more than running it; every turn appends)."""
    columns = ", ".join(f'"{field.column}"' for field in _MESSAGE_FIELDS)
    rows = [
        {
            "agent_version_id": None,
            **values,
            "session_id": session_id,
            "seq": start + offset,
            "wire": wire,
            "created_at": now,
        }
        for offset, (values, wire) in enumerate(zip(fields, wires, strict=True))
    ]
    appended: list[Appended] = []
    with connection.cursor() as cursor:
        for first in range(0, len(rows), _INSERT_BATCH):
            batch = rows[first : first + _INSERT_BATCH]
            params = [
                field.get_db_prep_save(row[field.attname], connection)
                for row in batch
                for field in _MESSAGE_FIELDS
            ]
            placeholders = "(" + ", ".join(["%s"] * len(_MESSAGE_FIELDS)) + ")"
            cursor.execute(
                f'INSERT INTO "{Message._meta.db_table}" ({columns}) VALUES '
                + ", ".join([placeholders] * len(batch))
                + ' RETURNING "id"',
                params,
            )
            ids = sorted(r[0] for r in cursor.fetchall())
            appended += [Appended(pk, row["seq"]) for row, pk in zip(batch, ids, strict=True)]
    return appended
