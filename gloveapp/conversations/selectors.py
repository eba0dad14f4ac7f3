"""Read-side queries of conversations, returning runtime (wire-format) objects.

`DjangoStore` and the REST remote store both read through these, so a remote caller sees
exactly what a local agent would. Writes go through `services`; the inbox's reads are
`inbox.selectors`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import JSONField, QuerySet

from gloveapp.conversations import serialization
from gloveapp.conversations.models import Message, Permission, Session, Task
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import PermissionStatus, TokenUsage
from gloveapp.core.types import Task as CoreTask
from gloveapp.lib import keyset
from gloveapp.lib.db.prepared import prepared_cursor
from gloveapp.lib.paging import Cursor

_FIELDS = serialization.MESSAGE_VALUES
# Which of them a raw cursor hands over as JSON text.
_JSON_FIELDS = tuple(isinstance(Message._meta.get_field(name), JSONField) for name in _FIELDS)


def read_messages(session_id: str, *, since_compaction: bool) -> list[CoreMessage]:
    """The session's history; with `since_compaction`, from its last compaction marker on.

    Raw SQL, prepared: every turn reads its context through here, and building the ORM
    queries (and planning them) cost more than the database answering them (profiled).
    """
    lower = 0
    with prepared_cursor() as cursor:
        if since_compaction:
            # Two statements on purpose: with the marker's seq as a value of its own the
            # (session, seq) range is the index scan's bound; folded into one statement as a
            # subquery, PostgreSQL cannot estimate the bound and filters the whole history.
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


def read_owned_messages(session_id: str, *, owner: Any, since_compaction: bool) -> list[Any] | None:
    """The history of the session `owner` holds under `session_id` (their key, see
    `Session`) as wire dicts (`Message.to_dict()`, what the REST GET sends), from the texts
    stored with the messages; None if they hold no such session."""
    body = read_owned_messages_json(session_id, owner=owner, since_compaction=since_compaction)
    return None if body is None else json.loads(body)


class HistoryTooLong(Exception):
    """An unpaged read of a history longer than its cap: nothing was sent."""

    def __init__(self, length: int, cap: int) -> None:
        super().__init__(f"{length} messages, more than {cap}")
        self.length = length
        self.cap = cap


def read_owned_messages_json(
    session_id: str, *, owner: Any, since_compaction: bool, cap: int | None = None
) -> bytes | None:
    """The body of the REST GET of a history (`read_owned_messages` rendered as
    DRF renders it), None if `owner` holds no such session: `stream_owned_messages_json`'s
    parts, joined."""
    history = stream_owned_messages_json(
        session_id, owner=owner, since_compaction=since_compaction, cap=cap
    )
    if history is None or isinstance(history, bytes):
        return history
    return b"".join(history)


# Messages one query of a streamed history reads: its memory, whatever the history's length.
HISTORY_CHUNK = 1000


def stream_owned_messages_json(
    session_id: str,
    *,
    owner: Any,
    since_compaction: bool,
    cap: int | None = None,
    chunk: int | None = None,
) -> bytes | Iterator[bytes] | None:
    """The body of the REST GET of a history, None if `owner` holds no such session: the
    texts stored with the messages, joined, as one `bytes` when the history fits in one
    `chunk`, else as parts to stream, each read by a keyset query of `chunk` messages (a
    history of any length is served in bounded memory). The first query is the ownership
    check (the history's join: a session without messages is one row of NULLs); the parts
    end at the last message that existed then, so the array is the history at one moment
    (messages are only appended, their seqs contiguous). With `cap`, a longer history
    raises `HistoryTooLong` having read none of its messages."""
    chunk = chunk or HISTORY_CHUNK
    owner_id = getattr(owner, "pk", None)
    if owner_id is None:
        return None
    with prepared_cursor() as cursor:
        lower = _owned_lower_bound(cursor, owner_id, session_id, since_compaction)
        if lower is None:
            return None
        # A history past the cap joins no message: the range's upper bound (an index
        # condition, from the session row) is then empty, so no message is read; its length
        # is the session's last_seq.
        bound = _UNCAPPED if cap is None else cap
        first = max(lower, 1)
        cursor.execute(_OWNED_WIRES_SQL, [lower, first, bound, owner_id, session_id, chunk + 1])
        rows = cursor.fetchall()
    if not rows:
        return None
    pk, last_seq = rows[0][2], rows[0][3]
    length = last_seq - first + 1
    if cap is not None and rows[0][0] is None and length > cap:
        raise HistoryTooLong(length, cap)
    picked = [(seq, wire) for seq, wire, *_ in rows[:chunk] if seq is not None]
    if len(rows) <= chunk:
        return ("[" + ",".join(_texts_of(pk, picked)) + "]").encode()
    return _streamed_history(pk, picked, last_seq, chunk)


def _streamed_history(
    session_pk: str, picked: list[tuple[int, str | None]], last_seq: int, chunk: int
) -> Iterator[bytes]:
    yield ("[" + ",".join(_texts_of(session_pk, picked))).encode()
    after = picked[-1][0]
    while after < last_seq:
        with prepared_cursor() as cursor:
            cursor.execute(_WIRES_AFTER_SQL, [session_pk, after, last_seq, chunk])
            rows = cursor.fetchall()
        if not rows:  # the session was deleted meanwhile: the array ends where it got to
            break
        yield ("," + ",".join(_texts_of(session_pk, rows))).encode()
        after = rows[-1][0]
    yield b"]"


def _texts_of(session_id: str, rows: list[tuple[int, str | None]]) -> list[str]:
    """The wire texts of (seq, wire) rows, those written before `Message.wire` existed
    rebuilt from their columns."""
    texts = [wire for _, wire in rows]
    if None in texts:
        missing = [seq for seq, wire in rows if wire is None]
        rebuilt = dict(
            (row[0], serialization.wire_json(_message_from_row(row[1:]).to_dict()))
            for row in Message.objects.filter(session_id=session_id, seq__in=missing)
            .values_list("seq", *_FIELDS)
            .iterator()
        )
        texts = [wire if wire is not None else rebuilt[seq] for seq, wire in rows]
    return texts


@dataclass(frozen=True, slots=True)
class MessagesPage:
    """A page of a history for the REST GET: wire texts in chronological order, the seqs of
    the first and last, and whether older / newer messages exist beyond them."""

    texts: list[str]
    first_seq: int | None
    last_seq: int | None
    has_earlier: bool
    has_later: bool


def read_owned_messages_page(
    session_id: str,
    *,
    owner: Any,
    limit: int,
    before: int | None = None,
    after: int | None = None,
    since_compaction: bool = False,
) -> MessagesPage | None:
    """A keyset page of the history `owner` holds under `session_id` (None if none): the
    newest `limit` messages older than `before` (the newest of all without it), or with
    `after` the oldest `limit` newer than it (and older than `before`, if given). Two
    index probes: the session, then a (session, seq) range."""
    owner_id = getattr(owner, "pk", None)
    if owner_id is None:
        return None
    found = (
        Session.objects.filter(owner_id=owner_id, key=session_id).values_list("pk", "last_seq")
    ).first()
    if found is None:
        return None
    pk, last_seq = found
    lower = 1
    if since_compaction:
        marker = (
            Message.objects.filter(session_id=pk, is_compaction=True)
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        lower = marker or 1
    rows = Message.objects.filter(session_id=pk, seq__gte=lower)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    if after is not None:
        rows = rows.filter(seq__gt=after).order_by("seq")
        picked = list(rows.values_list("seq", "wire")[:limit])
    else:
        picked = list(rows.order_by("-seq").values_list("seq", "wire")[:limit])[::-1]
    if not picked:
        return MessagesPage([], None, None, False, False)
    first, last = picked[0][0], picked[-1][0]
    # Seqs run from 1 without gaps (messages are deleted only with their session), so the
    # session's last_seq and the lower bound tell what lies beyond the page.
    has_earlier, has_later = first > lower, last < last_seq
    return MessagesPage(_texts_of(pk, picked), first, last, has_earlier, has_later)


def _owned_lower_bound(
    cursor: Any, owner_id: Any, session_id: str, since_compaction: bool
) -> int | None:
    """The first seq to read: 0, or with `since_compaction` the last marker's (None when the
    owner holds no such session). A bound of its own on the next query (see `read_messages`)."""
    if not since_compaction:
        return 0
    cursor.execute(_MARKER_SQL, [owner_id, session_id])
    found = cursor.fetchone()
    if found is None:
        return None
    return found[0] or 0


def _json(value: Any) -> Any:
    # A raw cursor hands JSON columns over as text (Django's backends load them that way).
    return json.loads(value) if isinstance(value, str | bytes) else value


_MESSAGE_TABLE = Message._meta.db_table
_SESSION_TABLE = Session._meta.db_table
_OWNED_WIRES_SQL = f"""
    SELECT m.seq, m.wire, s.id, s.last_seq
      FROM {_SESSION_TABLE} s
      LEFT JOIN {_MESSAGE_TABLE} m
             ON m.session_id = s.id AND m.seq >= %s
            AND m.seq <= CASE WHEN s.last_seq - %s < %s THEN s.last_seq ELSE -1 END
     WHERE s.owner_id = %s AND s."key" = %s
     ORDER BY m.seq
     LIMIT %s
"""
_UNCAPPED = 2**62
_WIRES_AFTER_SQL = (
    f'SELECT "seq", "wire" FROM "{_MESSAGE_TABLE}" WHERE "session_id" = %s AND "seq" > %s'
    ' AND "seq" <= %s ORDER BY "seq" LIMIT %s'
)
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


def sessions_with_parents(
    owner: Any, *, parent: Session | None = None, top_level: bool = False
) -> QuerySet[Session]:
    """`sessions_owned_by` with each one's parent at hand (its key is the id the owner knows
    the parent by), for the REST list: every one, subagents' included; only `parent`'s
    subagent sessions; or, with `top_level`, only those no agent delegated (the chat list's)."""
    sessions = sessions_owned_by(owner).select_related("parent")
    if parent is not None:
        sessions = sessions.filter(parent=parent)
    if top_level:
        sessions = sessions.filter(parent__isnull=True)
    return sessions


def sessions_page(
    sessions: QuerySet[Session], *, limit: int, cursor: Cursor | None = None
) -> tuple[list[Session], Cursor | None]:
    """One page of `sessions` (a `sessions_owned_by` queryset), newest first, from `cursor`
    on; and the cursor of the next page, None on the last. A keyset page: one probe of the
    (owner, created_at, key) index, the same cost for the first page and the thousandth."""
    if cursor is not None:
        sessions = sessions.filter(keyset.before(cursor))
    rows = list(sessions[: limit + 1])
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, Cursor(at=rows[-1].created_at, tie=rows[-1].key)


def sessions_listed_for(
    owner: Any, *, limit: int, cursor: Cursor | None = None
) -> tuple[list[Session], Cursor | None]:
    """The chat list: one page of the chats `owner` started (subagents' conversations are
    shown under their parent's), each with `person_message_count`, the messages the person
    sent (the runtime's `turn_count` counts model calls, two or more per answer that used a
    tool), kept on the row by the append: no history is read."""
    return sessions_page(
        sessions_owned_by(owner).filter(parent__isnull=True), limit=limit, cursor=cursor
    )


def session_messages(session_id: str) -> list[Message]:
    """Every message of the session as rows, oldest first (the admin's transcript and the
    exports; a person's page reads `history_window`)."""
    return list(Message.objects.filter(session_id=session_id).order_by("seq"))


# Rows read past a page's limit so that it never starts with a tool's result: the result is
# folded under its call, and a page split between them would show the call running forever.
_PAGE_LEAD = 8


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """A contiguous run of a session's messages, oldest first, as a page shows them."""

    messages: list[Message]
    has_earlier: bool  # messages older than the first shown exist

    @property
    def first_seq(self) -> int:
        return self.messages[0].seq if self.messages else 0

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq if self.messages else 0


def history_window(
    session_id: str,
    *,
    limit: int,
    before: int | None = None,
    start: int | None = None,
    widest: int | None = None,
) -> HistoryWindow:
    """The messages a person's page shows: the newest `limit` (or those older than `before`),
    never starting with a tool's result; or with `start`, everything from that seq on, when
    that is at most `widest` messages (a page that already shows them, refreshed), else the
    newest `limit`. Keyset reads on (session, seq): the cost of a page, not of the history."""
    rows = Message.objects.filter(session_id=session_id)
    if start is not None and before is None and widest is not None:
        tail = list(rows.filter(seq__gte=max(start, 1)).order_by("seq")[: widest + 1])
        if 0 < len(tail) <= widest:
            earlier = bool(tail) and tail[0].seq > 1 and rows.filter(seq__lt=tail[0].seq).exists()
            return HistoryWindow(messages=tail, has_earlier=earlier)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    newest_first = list(rows.order_by("-seq")[: limit + _PAGE_LEAD + 1])
    cut = min(limit, len(newest_first))
    while cut < len(newest_first) and newest_first[cut - 1].tool_results:
        cut += 1  # take the call the page's first message answers
    messages = newest_first[:cut][::-1]
    earlier = len(newest_first) > cut or len(newest_first) > limit + _PAGE_LEAD
    return HistoryWindow(messages=messages, has_earlier=earlier)


def session_tasks(session_id: str) -> list[Task]:
    """The session's task list as rows, in the agent's order."""
    return list(Task.objects.filter(session_id=session_id).order_by("position", "pk"))


def session_children(session: Session, *, call_ids: list[str] | None = None) -> list[Session]:
    """The subagent sessions `session`'s agent delegated to, oldest first; with `call_ids`,
    only those these tool calls delegated (what one page of the history shows)."""
    children = Session.objects.filter(parent=session)
    if call_ids is not None:
        children = children.filter(parent_call_id__in=call_ids)
    return list(children.order_by("created_at", "id"))


def session_depth(session_id: str, *, limit: int = 50) -> int:
    """How many parents above `session_id` (0 for a chat nobody delegated)."""
    depth = 0
    parent_id = Session.objects.filter(pk=session_id).values_list("parent_id", flat=True).first()
    while parent_id is not None and depth < limit:
        depth += 1
        parent_id = Session.objects.filter(pk=parent_id).values_list("parent_id", flat=True).first()
    return depth


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
    with prepared_cursor() as cursor:
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


def remembered_permissions(session_id: str) -> list[Permission]:
    """The chat's remembered answers to permission prompts ("always allow", "always deny")."""
    return list(
        Permission.objects.filter(session_id=session_id, status__in=["granted", "denied"]).order_by(
            "tool_name", "pk"
        )
    )
