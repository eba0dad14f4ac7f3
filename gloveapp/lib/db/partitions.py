"""Time partitions for the append-only logs on PostgreSQL, managed by the project.

A log that grows by millions of rows a day and is kept N days (`LOGS`: the live event log,
the idempotency keys, the mesh's sender and delivery records, the database queue's task
results) is a table declared `PARTITION BY RANGE` on its timestamp, one partition per day,
plus a DEFAULT partition for rows no day covers (a clock far off, an update that moves a
row into the past). Retention then drops whole days:
`DROP TABLE` of a partition is O(1), returns its disk at once and leaves no dead rows, where
a `DELETE` of a day's rows took minutes and left the table its size (live events: 1.85 GB,
77% dead).

The migration that makes a log partitioned does so only on PostgreSQL (`partition_table`);
on SQLite the table stays plain and retention deletes in batches. The turn worker's scheduler
(`gloveapp.turns.retention`) creates each day's partition ahead of time
(`partitions_ensure`) and drops the expired ones (`partitions_drop_older`). A table that is
not partitioned (SQLite, or its migration unapplied) is simply skipped here.

Why not pg_partman: it is an extension, so a managed PostgreSQL must offer it and someone
must `CREATE EXTENSION` it with rights the application's user usually lacks, and its
maintenance is a background worker or a cron call of its own. The project needs three
statements (create a day ahead, move strays out of DEFAULT, drop a day), run by the scheduler
it already has, on any PostgreSQL from 11 on.

The primary key of a partitioned table must include the partition key, so it is
`(id, <timestamp>)`; `id` still comes from one sequence for the whole table, so ids stay
monotonic across partitions (the live relay tails the event log by it; clients resume
from each event's number in its stream, `seq`, and a cursor whose next number was in a
dropped day is told to resync).

Any other unique key must include the partition key too, which would defeat it (a duplicate
sent across midnight lands in another partition). So a log whose point is a unique key (one
answer per user and idempotency key, one sender per mesh message id, one delivery per
message and recipient) keeps it in two parts: a unique index on each partition (same-day
duplicates are refused by the database, as before), and a transaction-level advisory lock
on the key (`lock_keys`) that every writer takes before it looks the key up and inserts, so
two writers of one key, on either side of midnight, run one after the other and the second
finds the first's row.
"""

from __future__ import annotations

import logging
import re
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import OperationalError, transaction
from django.db import connection as default_connection

from gloveapp.lib.db.batches import stop_if_asked

logger = logging.getLogger(__name__)

DAY = timedelta(days=1)
# How many days ahead the scheduler keeps partitions ready (rows of a day with no partition
# land in DEFAULT; `partitions_ensure` moves them out when it creates their day).
DAYS_AHEAD = 3
# A partition's drop (and creation) waits this long for the parent's lock: while it waits,
# every writer of the log queues behind its request, so the wait is short (2 s stalled
# appends 1.9 s behind a long reader, every round). A drop that times out is tried again
# DROP_TRIES times, DROP_PAUSE apart (the writers run in between), then next round.
LOCK_TIMEOUT = "100ms"
DROP_TRIES = 5
DROP_PAUSE_SECONDS = 0.5
# pg_advisory_xact_lock's key while a partition is made ("glove partitions").
ADVISORY_LOCK = 0x676C6F76_6570

_BOUND = re.compile(r"FROM \((?P<lower>[^)]*)\) TO \((?P<upper>[^)]*)\)")


@dataclass(frozen=True)
class Log:
    """A table partitioned by day on PostgreSQL (its migration calls `partition_table`)."""

    table: str
    # The partition key: a timestamp written with the row and never moved far.
    column: str
    # The primary key's column; the partitioned table's key is (key, column).
    key: str = "id"
    # Unique keys kept per partition (name, columns); across partitions, `lock_keys`.
    unique: tuple[tuple[str, tuple[str, ...]], ...] = ()


LOGS: tuple[Log, ...] = (
    Log("conversations_liveevent", "created_at"),
    Log(
        "conversations_idempotentrequest",
        "created_at",
        unique=(("one_request_per_idempotency_key", ("user_id", "key")),),
    ),
    Log(
        "mesh_meshsentmessage",
        "created_at",
        key="message_id",
        unique=(("mesh_one_sender_per_message", ("message_id",)),),
    ),
    Log(
        "mesh_meshdelivery",
        "delivered_at",
        unique=(("mesh_delivery_once_per_recipient", ("message_id", "recipient")),),
    ),
    # django-tasks-db's table (turns' migration partitions it; `turns/checks.py` watches its
    # schema): a UUID key, so no sequence; `enqueued_at` is set once, at enqueue.
    Log("django_tasks_database_dbtaskresult", "enqueued_at"),
)


def log_of(table: str) -> Log | None:
    return next((log for log in LOGS if log.table == table), None)


@dataclass(frozen=True)
class Partition:
    name: str
    # None: MINVALUE / MAXVALUE; both None with `default`: the DEFAULT partition.
    lower: datetime | None
    upper: datetime | None
    default: bool = False


def is_partitioned(table: str, *, connection: Any = None) -> bool:
    connection = connection or default_connection
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
            "WHERE c.relname = %s AND c.relnamespace = to_regnamespace(current_schema())",
            [table],
        )
        return cursor.fetchone() is not None


def partitions_of(table: str, *, connection: Any = None) -> list[Partition]:
    """The table's partitions, oldest first (DEFAULT last)."""
    connection = connection or default_connection
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE p.relname = %s AND p.relnamespace = to_regnamespace(current_schema())",
            [table],
        )
        rows = cursor.fetchall()
    found = []
    for name, bound in rows:
        match = _BOUND.search(bound or "")
        if match is None:
            found.append(Partition(name=name, lower=None, upper=None, default=True))
            continue
        found.append(
            Partition(name=name, lower=_bound(match["lower"]), upper=_bound(match["upper"]))
        )
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(
        found,
        key=lambda p: (p.default, p.lower or datetime.min.replace(tzinfo=UTC), p.upper or far),
    )


def _bound(text: str) -> datetime | None:
    text = text.strip().strip("'")
    if text in ("MINVALUE", "MAXVALUE"):
        return None
    return datetime.fromisoformat(text).astimezone(UTC)


def day_start(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def partition_name(table: str, lower: datetime) -> str:
    return f"{table}_p{lower:%Y%m%d}"


def _int32(text: str) -> int:
    value = zlib.crc32(text.encode())
    return value - (1 << 32) if value >= 1 << 31 else value


def lock_keys(table: str, keys: Iterable[str], *, connection: Any = None) -> None:
    """Uniqueness across partitions: take, until the transaction ends, an advisory lock on
    each of `keys` (a unique key's values joined in one string) of `table`, in one order so
    that two writers of several keys never deadlock. A writer calls it inside its
    transaction before it looks the keys up and inserts; a second writer of a key waits
    here until the first commits (then, at READ COMMITTED, its lookup sees the row) or
    rolls back. Two keys that hash alike only wait for each other. Transaction-level, so
    safe behind a transaction-pooling PgBouncer; a no-op elsewhere than PostgreSQL (SQLite
    writes one transaction at a time, and its tables keep their unique constraints)."""
    connection = connection or default_connection
    if connection.vendor != "postgresql":
        return
    if not connection.in_atomic_block:
        raise RuntimeError("lock_keys needs a transaction: the lock lasts until it ends")
    hashes = sorted({_int32(key) for key in keys})
    if not hashes:
        return
    with connection.cursor() as cursor:
        # The two-int4 form: a lock space apart from ADVISORY_LOCK's bigint one.
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, k) FROM unnest(%s::int[]) WITH ORDINALITY "
            "AS t(k, n) ORDER BY n",
            [_int32(table), hashes],
        )


def partitions_ensure(
    table: str,
    *,
    column: str,
    now: datetime,
    days_ahead: int = DAYS_AHEAD,
    unique: Sequence[tuple[str, Sequence[str]]] | None = None,
    connection: Any = None,
) -> list[str]:
    """Create the day partitions of `table`, from today's to `days_ahead` days ahead, that
    no partition covers yet, each with the table's per-partition unique indexes (`unique`,
    by default its `LOGS` entry's); returns their names. Rows of such a day already in
    DEFAULT move into it in the same transaction (PostgreSQL refuses to attach a range
    DEFAULT holds)."""
    connection = connection or default_connection
    if not is_partitioned(table, connection=connection):
        return []
    if unique is None:
        log = log_of(table)
        unique = log.unique if log is not None else ()
    existing = [p for p in partitions_of(table, connection=connection) if not p.default]
    default = next((p for p in partitions_of(table, connection=connection) if p.default), None)
    created = []
    first = day_start(now)
    for offset in range(days_ahead + 1):
        lower = first + offset * DAY
        upper = lower + DAY
        if any(_overlaps(p, lower, upper) for p in existing):
            continue
        name = partition_name(table, lower)
        _create_partition(table, column, name, lower, upper, default, unique, connection)
        existing.append(Partition(name=name, lower=lower, upper=upper))
        created.append(name)
    return created


def _overlaps(partition: Partition, lower: datetime, upper: datetime) -> bool:
    starts_before_end = partition.lower is None or partition.lower < upper
    ends_after_start = partition.upper is None or partition.upper > lower
    return starts_before_end and ends_after_start


def _create_partition(
    table: str,
    column: str,
    name: str,
    lower: datetime,
    upper: datetime,
    default: Partition | None,
    unique: Sequence[tuple[str, Sequence[str]]],
    connection: Any,
) -> None:
    qn = connection.ops.quote_name
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        # Several workers maintain partitions: one at a time (a transaction-level lock,
        # which a transaction-pooling PgBouncer keeps on one server connection), and the
        # one that comes second finds the partition made.
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK])
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if cursor.fetchone()[0]:
            return
        cursor.execute(
            f"CREATE TABLE {qn(name)} (LIKE {qn(table)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        )
        _create_unique_indexes(cursor, name, unique, connection)
        if default is not None:
            # Rows of this day that arrived before its partition did.
            range_sql = f"{qn(column)} >= %s AND {qn(column)} < %s"
            cursor.execute(
                f"WITH moved AS (DELETE FROM {qn(default.name)} WHERE {range_sql} RETURNING *) "
                f"INSERT INTO {qn(name)} SELECT * FROM moved",
                [lower, upper],
            )
        cursor.execute(
            f"ALTER TABLE {qn(table)} ATTACH PARTITION {qn(name)} FOR VALUES FROM (%s) TO (%s)",
            [lower, upper],
        )
    logger.info("created partition %s of %s", name, table)


def _create_unique_indexes(
    cursor: Any, partition: str, unique: Sequence[tuple[str, Sequence[str]]], connection: Any
) -> None:
    qn = connection.ops.quote_name
    for index, (_, columns) in enumerate(unique):
        cursor.execute(
            f"CREATE UNIQUE INDEX {qn(f'{partition}_u{index}')} ON {qn(partition)} "
            f"({', '.join(qn(column) for column in columns)})"
        )


def _holds(partition: str, keep: str, params: Sequence[Any], connection: Any) -> bool:
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {qn(partition)} WHERE {keep})", list(params))
        return bool(cursor.fetchone()[0])


def partitions_drop_older(
    table: str,
    *,
    cut: datetime,
    keep: str = "",
    keep_params: Sequence[Any] = (),
    connection: Any = None,
) -> tuple[list[str], int]:
    """Drop the partitions of `table` whose every row is older than `cut` (the DEFAULT
    partition never); returns their names and the rows they held (the planner's estimate:
    counting them would read what dropping does not).

    `keep`, an SQL condition (its parameters `keep_params`), names the rows that stay
    whatever their age (a queued task): a partition holding one is not dropped (its other
    old rows go in batches, `partitions_prune`). The check reads the partition without
    locking it, so `keep` must name rows no old row turns back into (a finished task stays
    finished) and no new row lands in a past day."""
    connection = connection or default_connection
    if not is_partitioned(table, connection=connection):
        return [], 0
    dropped, rows = [], 0
    for partition in partitions_of(table, connection=connection):
        if partition.default or partition.upper is None or partition.upper > cut:
            continue
        stop_if_asked()
        if keep and _holds(partition.name, keep, keep_params, connection):
            logger.info(
                "partition %s of %s holds rows to keep: pruned in batches", partition.name, table
            )
            continue
        estimate = _drop_partition(partition.name, connection)
        if estimate is None:
            logger.warning(
                "partition %s of %s not dropped: its lock was busy %d times; next round",
                partition.name,
                table,
                DROP_TRIES,
            )
            continue
        dropped.append(partition.name)
        rows += estimate
        logger.info("dropped partition %s of %s (about %d rows)", partition.name, table, estimate)
    return dropped, rows


def _drop_partition(name: str, connection: Any) -> int | None:
    """Drop partition `name` under the short LOCK_TIMEOUT, tried DROP_TRIES times; the rows
    it held (the planner's estimate), or None when its lock stayed busy."""
    qn = connection.ops.quote_name
    for attempt in range(DROP_TRIES):
        if attempt:
            time.sleep(DROP_PAUSE_SECONDS)
            stop_if_asked()
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                cursor.execute(
                    "SELECT COALESCE((SELECT GREATEST(reltuples, 0)::bigint FROM pg_class "
                    "WHERE oid = to_regclass(%s)), 0)",
                    [name],
                )
                estimate = cursor.fetchone()[0]
                # IF EXISTS: another worker's round may have dropped it a moment ago.
                cursor.execute(f"DROP TABLE IF EXISTS {qn(name)}")
            return int(estimate)
        except OperationalError as error:
            if not _lock_timed_out(error):
                raise
    return None


def _lock_timed_out(error: BaseException) -> bool:
    # SQLSTATE 55P03, lock_not_available: what `lock_timeout` raises.
    cause = error.__cause__ or error
    return getattr(cause, "sqlstate", None) == "55P03"


def partitions_prune(
    table: str,
    *,
    column: str,
    cut: datetime,
    batch: int,
    keep: str = "",
    keep_params: Sequence[Any] = (),
    connection: Any = None,
) -> int:
    """Retention of a partitioned `table`: drop its day partitions wholly older than `cut`
    and delete, in batches of `batch`, the older rows of the partitions that are not a day
    (DEFAULT and the one holding the rows from before the table was partitioned) and of
    the old partitions kept for a row that stays (`keep`, see `partitions_drop_older`). A
    day partition that straddles the cut is left whole: it is dropped once its last row is
    older, at most a day later. Returns the rows gone (estimated for dropped partitions)."""
    connection = connection or default_connection
    _, rows = partitions_drop_older(
        table, cut=cut, keep=keep, keep_params=keep_params, connection=connection
    )
    qn = connection.ops.quote_name
    condition, params = f"{qn(column)} < %s", [cut]
    if keep:
        condition, params = f"{condition} AND NOT ({keep})", [cut, *keep_params]
    for partition in partitions_of(table, connection=connection):
        is_day = not partition.default and partition.lower is not None
        if is_day and (partition.upper is None or partition.upper > cut):
            continue
        while True:
            stop_if_asked()
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {qn(partition.name)} WHERE ctid IN (SELECT ctid FROM "
                    f"{qn(partition.name)} WHERE {condition} LIMIT %s)",
                    [*params, batch],
                )
                deleted = cursor.rowcount
            rows += deleted
            if deleted < batch:
                break
    return rows


# -- the migrations ---------------------------------------------------------------------------
def _other_constraints(cursor: Any, table: str) -> list[tuple[str, str]]:
    """The table's own CHECK and FOREIGN KEY constraints (name, definition): what a
    `CREATE TABLE ... LIKE` leaves behind."""
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('c', 'f') AND conparentid = 0 "
        "ORDER BY conname",
        [table],
    )
    return cursor.fetchall()


def partition_table(
    schema_editor: Any,
    *,
    table: str,
    column: str,
    key: str = "id",
    unique: Sequence[tuple[str, Sequence[str]]] = (),
    now: datetime | None = None,
) -> None:
    """Turn the plain `table` (as Django created it) into one partitioned by day on
    `column`, keeping its rows, columns, indexes, check and foreign-key constraints and id
    sequence; PostgreSQL only (elsewhere, or already partitioned, it does nothing).

    The table's primary key becomes `(key, column)` (a partitioned table's unique keys must
    contain its partition key). Its other unique constraints become `unique` (name,
    columns): a unique index on each partition, the writers' `lock_keys` across them; a
    unique constraint not named there is dropped. Existing rows older than today go to one
    partition (`<table>_before`, dropped whole once retention passes today), today's to
    today's; then a day partition per day, and DEFAULT. It rewrites the table under an
    exclusive lock: its time is that of copying the rows (minutes for millions).
    """
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or is_partitioned(table, connection=connection):
        return
    qn = connection.ops.quote_name
    old = f"{table}_unpartitioned"
    seq = f"{table}_{key}_seq_p"
    today = day_start(now or datetime.now(UTC))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s) IS NOT NULL", [table, key])
        serial = cursor.fetchone()[0]
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'p'",
            [table],
        )
        pkey = cursor.fetchone()[0]
        constraints = _other_constraints(cursor, table)
        statements = [
            f"ALTER TABLE {qn(table)} RENAME TO {qn(old)}",
            f"CREATE TABLE {qn(table)} (LIKE {qn(old)} INCLUDING DEFAULTS INCLUDING GENERATED "
            f"INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY RANGE ({qn(column)})",
        ]
        if serial:
            # One sequence for the whole table: ids stay monotonic across partitions.
            statements += [
                f"CREATE SEQUENCE {qn(seq)} OWNED BY {qn(table)}.{qn(key)}",
                f"SELECT setval('{seq}', COALESCE((SELECT MAX({qn(key)}) FROM {qn(old)}), 0) "
                "+ 1, false)",
                f"ALTER TABLE {qn(table)} ALTER COLUMN {qn(key)} SET DEFAULT nextval('{seq}')",
            ]
        statements += [
            f"ALTER TABLE {qn(old)} RENAME CONSTRAINT {qn(pkey)} TO {qn(old + '_pkey')}",
            f"ALTER TABLE {qn(table)} ADD CONSTRAINT {qn(table + '_pkey')} "
            f"PRIMARY KEY ({qn(key)}, {qn(column)})",
        ]
        for statement in statements:
            cursor.execute(statement)
        # The old table's other indexes, recreated on the parent (each partition gets its own).
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
            "AND schemaname = current_schema()",
            [old],
        )
        index_defs = cursor.fetchall()
        cursor.execute(
            "SELECT conindid::regclass::text FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype IN ('p', 'u')",
            [old],
        )
        constraint_indexes = {row[0] for row in cursor.fetchall()}
        for name, definition in index_defs:
            if name in constraint_indexes:
                continue
            cursor.execute(f"DROP INDEX {qn(name)}")
            cursor.execute(
                definition.replace(f" ON {connection.ops.quote_name(old)} ", f" ON {qn(table)} ")
                .replace(f" ON public.{old} ", f" ON {qn(table)} ")
                .replace(f" ON {old} ", f" ON {qn(table)} ")
            )
        for suffix, bound in (
            ("_before", "FOR VALUES FROM (MINVALUE) TO (%s)"),
            ("_default", "DEFAULT"),
        ):
            cursor.execute(
                f"CREATE TABLE {qn(table + suffix)} PARTITION OF {qn(table)} {bound}",
                [today] if suffix == "_before" else None,
            )
            _create_unique_indexes(cursor, table + suffix, unique, connection)
        # Today's rows land in DEFAULT, and move to today's partition as it is made below.
        cursor.execute(f"INSERT INTO {qn(table)} SELECT * FROM {qn(old)}")
        cursor.execute(f"DROP TABLE {qn(old)}")
        # Checked once over the copied rows here, and by each partition as it is attached.
        for name, definition in constraints:
            cursor.execute(f"ALTER TABLE {qn(table)} ADD CONSTRAINT {qn(name)} {definition}")
    partitions_ensure(table, column=column, now=today, unique=unique, connection=connection)


def unpartition_table(
    schema_editor: Any,
    *,
    table: str,
    key: str = "id",
    unique: Sequence[tuple[str, Sequence[str]]] = (),
) -> None:
    """The reverse migration: the rows in a plain table of the same name, keyed by `key`,
    with `unique`'s constraints back (it fails, and the migration with it, if rows broke
    one: the database no longer refused such rows by itself)."""
    connection = schema_editor.connection
    if not is_partitioned(table, connection=connection):
        return
    qn = connection.ops.quote_name
    old = f"{table}_partitioned"
    seq = f"{table}_{key}_seq_p"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND schemaname = "
            "current_schema() AND indexname NOT LIKE %s",
            [table, "%pkey%"],
        )
        index_defs = [row[0] for row in cursor.fetchall()]
        constraints = _other_constraints(cursor, table)
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [seq])
        serial = cursor.fetchone()[0]
        cursor.execute(f"ALTER TABLE {qn(table)} RENAME TO {qn(old)}")
        cursor.execute(f"CREATE TABLE {qn(table)} (LIKE {qn(old)} INCLUDING DEFAULTS)")
        cursor.execute(f"INSERT INTO {qn(table)} SELECT * FROM {qn(old)}")
        if serial:
            cursor.execute(f"ALTER SEQUENCE {qn(seq)} OWNED BY {qn(table)}.{qn(key)}")
        cursor.execute(f"DROP TABLE {qn(old)} CASCADE")
        if serial:
            cursor.execute(f"ALTER SEQUENCE {qn(seq)} RENAME TO {qn(f'{table}_{key}_seq')}")
        cursor.execute(
            f"ALTER TABLE {qn(table)} ADD CONSTRAINT {qn(table + '_pkey')} PRIMARY KEY ({qn(key)})"
        )
        for name, columns in unique:
            if tuple(columns) != (key,):
                cursor.execute(
                    f"ALTER TABLE {qn(table)} ADD CONSTRAINT {qn(name)} "
                    f"UNIQUE ({', '.join(qn(c) for c in columns)})"
                )
        for definition in index_defs:
            cursor.execute(definition.replace(" ON ONLY ", " ON "))
        for name, definition in constraints:
            cursor.execute(f"ALTER TABLE {qn(table)} ADD CONSTRAINT {qn(name)} {definition}")
