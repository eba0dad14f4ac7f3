"""Time partitions for the append-only logs on PostgreSQL, managed by the project.

A log that grows by millions of rows a day and is kept N days (the live event log, the
idempotency keys, the mesh's sender records) is a table declared `PARTITION BY RANGE` on its
timestamp, one partition per day, plus a DEFAULT partition for rows no day covers (a clock
far off, an update that moves a row into the past). Retention then drops whole days:
`DROP TABLE` of a partition is O(1), returns its disk at once and leaves no dead rows, where
a `DELETE` of a day's rows took minutes and left the table its size (live events: 1.85 GB,
77% dead).

The migration that makes a log partitioned does so only on PostgreSQL (`partition_table`);
on SQLite the table stays plain and retention deletes in batches. The turn worker's scheduler
(`gloveapp.turns.retention`) creates each day's partition ahead of time
(`partitions_ensure`) and drops the expired ones (`partitions_drop_older`). A table that is
not partitioned (SQLite, or a PostgreSQL database whose migration ran before this module)
is simply skipped here.

Why not pg_partman: it is an extension, so a managed PostgreSQL must offer it and someone
must `CREATE EXTENSION` it with rights the application's user usually lacks, and its
maintenance is a background worker or a cron call of its own. The project needs three
statements (create a day ahead, move strays out of DEFAULT, drop a day), run by the scheduler
it already has, on any PostgreSQL from 11 on.

The primary key of a partitioned table must include the partition key, so it is
`(id, <timestamp>)`; `id` still comes from one sequence for the whole table, so ids stay
monotonic across partitions (live replay relies on it: a cursor older than the oldest
remaining id, after a day was dropped, is told to resync).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection as default_connection
from django.db import transaction

logger = logging.getLogger(__name__)

DAY = timedelta(days=1)
# How many days ahead the scheduler keeps partitions ready (rows of a day with no partition
# land in DEFAULT; `partitions_ensure` moves them out when it creates their day).
DAYS_AHEAD = 3
# A partition's drop waits this long for the parent's lock, then gives up until the next
# round, so it never queues every writer of the log behind a long reader.
LOCK_TIMEOUT = "2s"
# pg_advisory_xact_lock's key while a partition is made ("glove partitions").
ADVISORY_LOCK = 0x676C6F76_6570

_BOUND = re.compile(r"FROM \((?P<lower>[^)]*)\) TO \((?P<upper>[^)]*)\)")


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


def partitions_ensure(
    table: str, *, column: str, now: datetime, days_ahead: int = DAYS_AHEAD, connection: Any = None
) -> list[str]:
    """Create the day partitions of `table`, from today's to `days_ahead` days ahead, that
    no partition covers yet; returns their names. Rows of such a day already in DEFAULT move
    into it in the same transaction (PostgreSQL refuses to attach a range DEFAULT holds)."""
    connection = connection or default_connection
    if not is_partitioned(table, connection=connection):
        return []
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
        _create_partition(table, column, name, lower, upper, default, connection)
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


def partitions_drop_older(
    table: str, *, cut: datetime, connection: Any = None
) -> tuple[list[str], int]:
    """Drop the partitions of `table` whose every row is older than `cut` (the DEFAULT
    partition never); returns their names and the rows they held (the planner's estimate:
    counting them would read what dropping does not)."""
    connection = connection or default_connection
    if not is_partitioned(table, connection=connection):
        return [], 0
    qn = connection.ops.quote_name
    dropped, rows = [], 0
    for partition in partitions_of(table, connection=connection):
        if partition.default or partition.upper is None or partition.upper > cut:
            continue
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute(
                "SELECT COALESCE((SELECT GREATEST(reltuples, 0)::bigint FROM pg_class "
                "WHERE oid = to_regclass(%s)), 0)",
                [partition.name],
            )
            estimate = cursor.fetchone()[0]
            # IF EXISTS: another worker's round may have dropped it a moment ago.
            cursor.execute(f"DROP TABLE IF EXISTS {qn(partition.name)}")
        dropped.append(partition.name)
        rows += estimate
        logger.info("dropped partition %s of %s (about %d rows)", partition.name, table, estimate)
    return dropped, rows


def partitions_prune(
    table: str, *, column: str, cut: datetime, batch: int, connection: Any = None
) -> int:
    """Retention of a partitioned `table`: drop its day partitions wholly older than `cut`
    and delete, in batches of `batch`, the older rows of the partitions that are not a day
    (DEFAULT and the one holding the rows from before the table was partitioned). A day
    partition that straddles the cut is left whole: it is dropped once its last row is
    older, at most a day later. Returns the rows gone (estimated for dropped partitions)."""
    connection = connection or default_connection
    _, rows = partitions_drop_older(table, cut=cut, connection=connection)
    qn = connection.ops.quote_name
    for partition in partitions_of(table, connection=connection):
        if not partition.default and partition.lower is not None:
            continue
        while True:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {qn(partition.name)} WHERE ctid IN (SELECT ctid FROM "
                    f"{qn(partition.name)} WHERE {qn(column)} < %s LIMIT %s)",
                    [cut, batch],
                )
                deleted = cursor.rowcount
            rows += deleted
            if deleted < batch:
                break
    return rows


# -- the migrations ---------------------------------------------------------------------------
def partition_table(
    schema_editor: Any,
    *,
    table: str,
    column: str,
    now: datetime | None = None,
) -> None:
    """Turn the plain `table` (as Django created it) into one partitioned by day on
    `column`, keeping its rows, columns, indexes and id sequence; PostgreSQL only.

    The table's primary key becomes `(id, column)` (a partitioned table's unique keys must
    contain its partition key), so a table with other unique constraints is not a candidate.
    Existing rows older than today go to one partition (`<table>_before`, dropped whole once
    retention passes today), today's to today's; then a day partition per day, and DEFAULT.
    """
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or is_partitioned(table, connection=connection):
        return
    qn = connection.ops.quote_name
    old = f"{table}_unpartitioned"
    seq = f"{table}_id_seq"
    today = day_start(now or datetime.now(UTC))
    statements = [
        f"ALTER TABLE {qn(table)} RENAME TO {qn(old)}",
        f"CREATE TABLE {qn(table)} (LIKE {qn(old)} INCLUDING DEFAULTS INCLUDING GENERATED "
        f"INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY RANGE ({qn(column)})",
        f"CREATE SEQUENCE {qn(seq + '_p')} OWNED BY {qn(table)}.id",
        f"SELECT setval('{seq}_p', COALESCE((SELECT MAX(id) FROM {qn(old)}), 0) + 1, false)",
        f"ALTER TABLE {qn(table)} ALTER COLUMN id SET DEFAULT nextval('{seq}_p')",
        f"ALTER TABLE {qn(old)} RENAME CONSTRAINT {qn(table + '_pkey')} TO {qn(old + '_pkey')}",
        f"ALTER TABLE {qn(table)} ADD CONSTRAINT {qn(table + '_pkey')} "
        f"PRIMARY KEY (id, {qn(column)})",
    ]
    with connection.cursor() as cursor:
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
        cursor.execute(
            f"CREATE TABLE {qn(table + '_before')} PARTITION OF {qn(table)} "
            f"FOR VALUES FROM (MINVALUE) TO (%s)",
            [today],
        )
        cursor.execute(f"CREATE TABLE {qn(table + '_default')} PARTITION OF {qn(table)} DEFAULT")
        # Today's rows land in DEFAULT, and move to today's partition as it is made below.
        cursor.execute(f"INSERT INTO {qn(table)} SELECT * FROM {qn(old)}")
        cursor.execute(f"DROP TABLE {qn(old)}")
    partitions_ensure(table, column=column, now=today, connection=connection)


def unpartition_table(schema_editor: Any, *, table: str) -> None:
    """The reverse migration: the rows in a plain table of the same name, keyed by `id`."""
    connection = schema_editor.connection
    if not is_partitioned(table, connection=connection):
        return
    qn = connection.ops.quote_name
    old = f"{table}_partitioned"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND schemaname = "
            "current_schema() AND indexname NOT LIKE %s",
            [table, "%pkey%"],
        )
        index_defs = [row[0] for row in cursor.fetchall()]
        cursor.execute(f"ALTER TABLE {qn(table)} RENAME TO {qn(old)}")
        cursor.execute(f"CREATE TABLE {qn(table)} (LIKE {qn(old)} INCLUDING DEFAULTS)")
        cursor.execute(f"INSERT INTO {qn(table)} SELECT * FROM {qn(old)}")
        cursor.execute(f"ALTER SEQUENCE {qn(f'{table}_id_seq_p')} OWNED BY {qn(table)}.id")
        cursor.execute(f"DROP TABLE {qn(old)} CASCADE")
        cursor.execute(
            f"ALTER SEQUENCE {qn(f'{table}_id_seq_p')} RENAME TO {qn(f'{table}_id_seq')}"
        )
        cursor.execute(
            f"ALTER TABLE {qn(table)} ADD CONSTRAINT {qn(table + '_pkey')} PRIMARY KEY (id)"
        )
        for definition in index_defs:
            cursor.execute(definition.replace(" ON ONLY ", " ON "))
