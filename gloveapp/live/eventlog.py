"""The event log's write side, the transactional outbox: a change and the live event announcing it are one commit.

Services call `record_event` inside their own `transaction.atomic()`; the relay (another
module) reads new `LiveEvent` rows and hands them to its process's sockets. Because the row
commits or rolls back with the change, a page never hears of a change that did not happen,
and a change made by any process (a management command, a webhook worker) still reaches it.

Event types and their payloads (the relay and the pages rely on these shapes):
- "message.appended"  {"seq": int, "message": <Message wire dict>}
- "tasks.replaced"    {"tasks": [<Task wire dict>, ...]}
- "inbox.changed"     {"item": <InboxItem wire dict>, "resolved_by": str | None}
- "session.updated"   {"session": {"id", "title", "agent_name", "token_count", "turn_count"}}
- "session.deleted"   {"id": str}
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.lib.db.partitions import is_partitioned, partitions_prune
from gloveapp.live.models import LiveEvent, LiveStreamCounter
from gloveapp.live.outbox import before_events_insert

# PostgreSQL delivers a NOTIFY at commit (and drops it on rollback), so a relay that LISTENs
# on this channel wakes as soon as an event is durable, without Redis and without polling.
LIVE_EVENTS_CHANNEL = "glove_live_events"


def record_event(*, stream: str, type: str, payload: dict[str, Any]) -> LiveEvent:
    """Write one event row; must run inside the transaction that makes the change."""
    return record_events(stream=stream, events=[(type, payload)])[0]


def record_events(*, stream: str, events: list[tuple[str, dict[str, Any]]]) -> list[LiveEvent]:
    """Several events of one stream in one insert (a batch of appended messages)."""
    return record_stream_events([(stream, type_, payload) for type_, payload in events])


def record_stream_events(events: list[tuple[str, str, dict[str, Any]]]) -> list[LiveEvent]:
    """Events of one or more streams, `(stream, type, payload)`, in one insert: a change
    announced on several streams (a chat's and its console's) pays one lock statement, one
    INSERT and one NOTIFY, not one of each per stream. Each stream's events keep their order;
    the streams are locked in the order they are first named."""
    if not connection.in_atomic_block:
        raise RuntimeError(
            "record_event() must be called inside the change's transaction.atomic() block, "
            "so the event commits or rolls back with it."
        )
    streams = list(dict.fromkeys(stream for stream, _, _ in events))
    # Per-stream commit order on PostgreSQL; wake the relays on commit.
    before_events_insert(streams)
    rows = _insert(events)
    # Relays LISTEN only without Redis (which wakes them instead); a NOTIFY also takes a
    # global lock at commit, so it is sent only when someone listens.
    if rows and connection.vendor == "postgresql" and not settings.REDIS_URL:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT " + ", ".join(["pg_notify(%s, %s)"] * len(streams)),
                [value for stream in streams for value in (LIVE_EVENTS_CHANNEL, stream)],
            )
    return rows


_TABLE = LiveEvent._meta.db_table
_COUNTERS = LiveStreamCounter._meta.db_table
_PAYLOAD = LiveEvent._meta.get_field("payload")
_CREATED_AT = LiveEvent._meta.get_field("created_at")
_BATCH = 200  # rows per INSERT (up to 8 parameters each: within every backend's limit)


def _insert(events: list[tuple[str, str, dict[str, Any]]]) -> list[LiveEvent]:
    """The rows `LiveEvent.objects.bulk_create` would write, by a plain INSERT ... RETURNING:
    every turn writes events, and compiling the ORM's insert cost more than running it.

    Each event takes the next number of its stream (`seq`) from the stream's counter row,
    advanced in the same transaction (the caller holds the streams' locks): on PostgreSQL in
    the insert's own statement, on SQLite (which serialises writers) in one before it."""
    now = timezone.now()
    created_at = _CREATED_AT.get_db_prep_save(now, connection)
    rows: list[LiveEvent] = []
    with connection.cursor() as cursor:
        for start in range(0, len(events), _BATCH):
            batch = events[start : start + _BATCH]
            # Each event's place among its stream's events in this batch, and their count.
            counts: dict[str, int] = {}
            places = []
            for stream, _, _ in batch:
                counts[stream] = counts.get(stream, 0) + 1
                places.append(counts[stream])
            payloads = [_PAYLOAD.get_db_prep_save(payload, connection) for _, _, payload in batch]
            if connection.vendor == "postgresql":
                numbered = _insert_postgresql(cursor, batch, places, counts, payloads, created_at)
            else:
                numbered = _insert_stepwise(cursor, batch, places, counts, payloads, created_at)
            rows += [
                LiveEvent(
                    id=pk, stream=stream, seq=seq, type=type_, payload=payload, created_at=now
                )
                for (pk, seq), (stream, type_, payload) in zip(numbered, batch, strict=True)
            ]
    return rows


_UPSERT = (
    f'INSERT INTO "{_COUNTERS}" ("stream", "last_seq") VALUES {{values}}'
    f' ON CONFLICT ("stream") DO UPDATE SET "last_seq" = "{_COUNTERS}"."last_seq"'
    ' + EXCLUDED."last_seq" RETURNING "stream", "last_seq"'
)


def _insert_postgresql(cursor, batch, places, counts, payloads, created_at) -> list[tuple]:
    """One statement: the streams' counters advanced, the events inserted with their
    numbers; `(id, seq)` of each event, in order."""
    params: list[Any] = []
    for stream, count in counts.items():
        params += [stream, count]
    for index, ((stream, type_, _), place, payload) in enumerate(
        zip(batch, places, payloads, strict=True)
    ):
        params += [index, stream, type_, payload, place, counts[stream]]
    cursor.execute(
        "WITH c AS ("
        + _UPSERT.format(values=", ".join(["(%s, %s::bigint)"] * len(counts)))
        + "), v (ord, stream, type, payload, place, n) AS (VALUES "
        + ", ".join(["(%s::integer, %s, %s, %s::jsonb, %s::bigint, %s::bigint)"] * len(batch))
        + f') INSERT INTO "{_TABLE}" ("stream", "seq", "type", "payload", "created_at")'
        ' SELECT v.stream, c."last_seq" - v.n + v.place, v.type, v.payload, %s'
        ' FROM v JOIN c ON c."stream" = v.stream ORDER BY v.ord RETURNING "id", "stream", "seq"',
        [*params, created_at],
    )
    returned = cursor.fetchall()
    # An event's number is its stream's first in this batch plus its place; its id, the
    # row's of that stream and number (ids follow the insert's order, so a stream's ids
    # and numbers rise together, which the relay's delivery order relies on).
    first: dict[str, int] = {}
    for _, stream, seq in returned:
        first[stream] = min(seq, first.get(stream, seq))
    ids = {(stream, seq): pk for pk, stream, seq in returned}
    numbered = []
    for (stream, _, _), place in zip(batch, places, strict=True):
        seq = first[stream] + place - 1
        numbered.append((ids[stream, seq], seq))
    return numbered


def _insert_stepwise(cursor, batch, places, counts, payloads, created_at) -> list[tuple]:
    """The counters advanced, then the events inserted with their numbers (two statements:
    SQLite has no data-modifying CTEs, and its write lock already orders the writers)."""
    cursor.execute(
        _UPSERT.format(values=", ".join(["(%s, %s)"] * len(counts))),
        [value for stream, count in counts.items() for value in (stream, count)],
    )
    last = dict(cursor.fetchall())
    seqs = [
        last[stream] - counts[stream] + place
        for (stream, _, _), place in zip(batch, places, strict=True)
    ]
    params: list[Any] = []
    for (stream, type_, _), seq, payload in zip(batch, seqs, payloads, strict=True):
        params += [stream, seq, type_, payload, created_at]
    cursor.execute(
        f'INSERT INTO "{_TABLE}" ("stream", "seq", "type", "payload", "created_at") VALUES '
        + ", ".join(["(%s, %s, %s, %s, %s)"] * len(batch))
        + ' RETURNING "id"',
        params,
    )
    # RETURNING gives the rows in insertion order (as bulk_create relies on); sorted
    # anyway, since ids increase in that order.
    ids = sorted(row[0] for row in cursor.fetchall())
    return list(zip(ids, seqs, strict=True))


def live_events_prune(*, older_than: timedelta) -> int:
    """Forget events older than `older_than`; returns how many (dropped partitions' rows
    estimated). The turn worker's scheduler runs it (GLOVE_RETAIN_LIVE_EVENTS_DAYS), and
    `prune_live_events` by hand.

    On PostgreSQL the log is partitioned by day: whole days are dropped
    (`gloveapp.lib.db.partitions.partitions_prune`); elsewhere rows go in bounded batches. Pages
    rendered before the cut that reconnect get a `resync` (reload your state) instead of a
    replay, so pruning never makes a client silently miss a change.
    """
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    cut = timezone.now() - older_than
    table = LiveEvent._meta.db_table
    if is_partitioned(table):
        return partitions_prune(
            table, column="created_at", cut=cut, batch=settings.GLOVE_RETENTION_BATCH
        )
    return delete_in_batches(LiveEvent.objects.filter(created_at__lt=cut))
