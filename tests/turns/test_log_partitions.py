"""PostgreSQL: the append-only logs besides the live events (idempotency keys, the mesh's
sender and delivery records, the database queue's task results) are partitioned by day, and
the turn worker's scheduler drops their expired days (no cron line): each table shrinks at
once. A day still holding a queued task is kept, its finished rows deleted in batches.
(The live event log's own test: tests/live/test_partitions.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from gloveapp.conversations.models import IdempotentRequest
from gloveapp.lib.db import partitions
from gloveapp.turns.checks import COLUMNS, task_results_schema_errors
from gloveapp.turns.retention import task_results_prune
from mesh.models import MeshDelivery, MeshSentMessage
from tests.helpers import serve_worker_until

DAYS = 9
ROWS = 6_000
PAD = "repeat('x', 300)"
TASK_RESULTS = DBTaskResult._meta.db_table

# Each log: its setting, and the INSERT of ROWS rows spread over DAYS days (%(at)s: a row's
# time, from DAYS - 1 days ago to now).
LOGS = {
    IdempotentRequest._meta.db_table: (
        "GLOVE_RETAIN_IDEMPOTENCY_KEYS_DAYS",
        "INSERT INTO {table} (user_id, key, scope, fingerprint, answer, created_at) "
        "SELECT %(user)s, 'k' || g, 's', 'f', jsonb_build_object('pad', {pad}), {at} {rows}",
    ),
    MeshSentMessage._meta.db_table: (
        "GLOVE_RETAIN_MESH_DAYS",
        "INSERT INTO {table} (message_id, sender, kind, created_at) "
        "SELECT 'm' || g || repeat('x', 100), 'a', 'direct', {at} {rows}",
    ),
    MeshDelivery._meta.db_table: (
        "GLOVE_RETAIN_MESH_DAYS",
        "INSERT INTO {table} (message_id, recipient, sender, kind, body, delivered_at) "
        "SELECT 'm' || g, 'b', 'a', 'direct', jsonb_build_object('pad', {pad}), {at} {rows}",
    ),
    TASK_RESULTS: (
        "GLOVE_RETAIN_TASK_RESULTS_DAYS",
        "INSERT INTO {table} (id, status, args_kwargs, priority, task_path, queue_name, "
        "backend_name, run_after, enqueued_at, started_at, finished_at, return_value, "
        "exception_class_path, traceback, worker_ids) "
        "SELECT gen_random_uuid(), 'SUCCESSFUL', jsonb_build_object('pad', {pad}), 0, 't', "
        "'default', 'default', {at}, {at}, {at}, {at} + interval '1 second', NULL, '', '', "
        "'[]'::jsonb {rows}",
    ),
}


def table_size(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0)::bigint "
            "FROM pg_partition_tree(%s::regclass)",
            [table],
        )
        return cursor.fetchone()[0]


def truncate(tables: list[str]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)}")


def day_partitions(table: str) -> list[partitions.Partition]:
    return [p for p in partitions.partitions_of(table) if not p.default]


def make_past_days(table: str, column: str) -> None:
    now = timezone.now()
    # The partition of the rows from before partitioning (empty here) makes way for days.
    partitions.partitions_drop_older(table, cut=partitions.day_start(now))
    partitions.partitions_ensure(
        table, column=column, now=now - timedelta(days=DAYS), days_ahead=DAYS + 2
    )


def fill(table: str, user_id: int) -> None:
    log = partitions.log_of(table)
    make_past_days(table, log.column)
    _, insert = LOGS[table]
    at = "%(now)s - ((%(days)s - 1 - g * %(days)s / %(rows)s) * interval '1 day')"
    rows = "FROM generate_series(0, %(rows)s - 1) AS g"
    with connection.cursor() as cursor:
        cursor.execute(
            insert.format(table=table, pad=PAD, at=at, rows=rows),
            {"now": timezone.now(), "days": DAYS, "rows": ROWS, "user": user_id},
        )
        cursor.execute(f"ANALYZE {table}")


@pytest.fixture
def on_postgres(requires_postgres, close_worker_connections):
    for table in LOGS:
        assert partitions.is_partitioned(table), table


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
async def test_the_worker_drops_every_logs_expired_days_and_each_table_shrinks(
    on_postgres, settings
):
    user = await get_user_model().objects.acreate(username="keys")
    # From empty tables: the suite's clean-up between tests DELETEs (their dead space would
    # stay in the days that are kept and count in the sizes compared below).
    await sync_to_async(truncate)(list(LOGS))
    before = {}
    for table in LOGS:
        await sync_to_async(fill)(table, user.pk)
        before[table] = (
            await sync_to_async(table_size)(table),
            {p.name for p in await sync_to_async(day_partitions)(table)},
        )
    for setting, _ in LOGS.values():
        setattr(settings, setting, 3)
    cut = timezone.now() - timedelta(days=3)

    def expired_left() -> list[str]:
        return [
            p.name
            for table in LOGS
            for p in day_partitions(table)
            if p.upper is not None and p.upper <= cut
        ]

    await serve_worker_until(lambda: not expired_left(), worker_id="log-partitions-test", looks=600)

    assert await sync_to_async(expired_left)() == []
    for table, (size, days) in before.items():
        remaining = {p.name for p in await sync_to_async(day_partitions)(table)}
        assert len(days - remaining) >= DAYS - 4, table
        assert await sync_to_async(table_size)(table) < size * 0.6, table
    # What is newer than the cut is still there; none of the dropped days' rows is.
    for model, column in (
        (IdempotentRequest, "created_at"),
        (MeshSentMessage, "created_at"),
        (MeshDelivery, "delivered_at"),
        (DBTaskResult, "enqueued_at"),
    ):
        rows = model.objects.all()
        assert not await rows.filter(**{f"{column}__lt": cut - timedelta(days=1)}).aexists()
        assert await rows.filter(**{f"{column}__gte": cut}).aexists()


def task(*, status: str, enqueued: timedelta, finished: timedelta | None) -> DBTaskResult:
    row = DBTaskResult.objects.create(
        status=status,
        args_kwargs={"args": [], "kwargs": {}},
        task_path="gloveapp.turns.queue.tasks.run_session",
        backend_name="default",
        run_after=timezone.now(),
        exception_class_path="",
        traceback="",
    )
    now = timezone.now()
    DBTaskResult.objects.filter(pk=row.pk).update(
        enqueued_at=now - enqueued, finished_at=None if finished is None else now - finished
    )
    return row


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_day_holding_a_queued_or_recently_finished_task_stays_and_loses_its_finished_rows(
    on_postgres, settings
):
    settings.GLOVE_RETENTION_BATCH = 2
    make_past_days(TASK_RESULTS, "enqueued_at")
    days = timedelta(days=1)
    # Six days ago: finished long ago, but a task of that day is still queued.
    queued = task(status="READY", enqueued=6 * days, finished=None)
    gone = [task(status="SUCCESSFUL", enqueued=6 * days, finished=6 * days) for _ in range(5)]
    # Five days ago: one ran for days and finished after the cut.
    late = task(status="SUCCESSFUL", enqueued=5 * days, finished=days)
    gone.append(task(status="FAILED", enqueued=5 * days, finished=5 * days))
    # Four days ago: every task finished before the cut: the day goes whole.
    gone += [task(status="SUCCESSFUL", enqueued=4 * days, finished=4 * days) for _ in range(3)]

    def partition_of(pk) -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT tableoid::regclass::text FROM {TASK_RESULTS} WHERE id = %s", [pk]
            )
            return cursor.fetchone()[0]

    kept_days = {partition_of(queued.pk), partition_of(late.pk)}
    whole_day = partition_of(gone[-1].pk)

    task_results_prune(older_than=3 * days)

    assert set(DBTaskResult.objects.values_list("pk", flat=True)) == {queued.pk, late.pk}
    names = {p.name for p in partitions.partitions_of(TASK_RESULTS)}
    assert kept_days <= names
    assert whole_day not in names
    # Once the queued task finished long ago too, its day goes.
    DBTaskResult.objects.filter(pk=queued.pk).update(
        status="SUCCESSFUL", finished_at=timezone.now() - 6 * days
    )
    task_results_prune(older_than=3 * days)
    assert list(DBTaskResult.objects.values_list("pk", flat=True)) == [late.pk]
    assert partition_of(late.pk) in {p.name for p in partitions.partitions_of(TASK_RESULTS)}
    assert len(kept_days & {p.name for p in partitions.partitions_of(TASK_RESULTS)}) == 1


@pytest.mark.django_db
@pytest.mark.postgres
def test_every_partition_has_its_logs_unique_index_and_task_results_match_the_model(
    requires_postgres,
):
    for log in partitions.LOGS:
        assert partitions.is_partitioned(log.table), log.table
        for partition in partitions.partitions_of(log.table):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT array_agg(a.attname ORDER BY k.n) FROM pg_index i "
                    "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
                    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
                    "WHERE i.indrelid = %s::regclass AND i.indisunique AND NOT i.indisprimary "
                    "GROUP BY i.indexrelid",
                    [partition.name],
                )
                found = sorted(tuple(row[0]) for row in cursor.fetchall())
            assert found == sorted(tuple(cols) for _, cols in log.unique), partition.name
    # django-tasks-db's model and the table turns/0001 partitioned: the same columns, and
    # the claim query's partial index on the partitioned table.
    with connection.cursor() as cursor:
        columns = {
            c.name for c in connection.introspection.get_table_description(cursor, TASK_RESULTS)
        }
        indexes = connection.introspection.get_constraints(cursor, TASK_RESULTS)
    assert columns == COLUMNS == {f.column for f in DBTaskResult._meta.concrete_fields}
    assert {i.name for i in DBTaskResult._meta.indexes} <= set(indexes)
    assert indexes["django_tasks_database_dbtaskresult_pkey"]["columns"] == ["id", "enqueued_at"]


def test_the_schema_check_fails_when_django_tasks_db_moves_on():
    from django.core.checks import run_checks

    assert not [e for e in run_checks() if e.id == "glove.E030"]
    current = (
        ["0020_update_db_task_result_ordering", "0021_conditional_partial_index_ordering"],
        COLUMNS,
        [
            "django_task_backend_071754_idx",
            "django_task_queue_n_99c321_idx",
            "tasks_db_new_ordering_idx",
        ],
        ["priority_range"],
    )
    assert task_results_schema_errors(*current) == []
    newer = task_results_schema_errors([*current[0], "0022_dbtaskresult_attempts"], *current[1:])
    assert [e.id for e in newer] == ["glove.E030"]
    assert "0022_dbtaskresult_attempts" in newer[0].msg
    more = task_results_schema_errors(current[0], {*COLUMNS, "attempts"}, *current[2:])
    assert [e.id for e in more] == ["glove.E030"]
    assert "attempts" in more[0].msg


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_long_reader_delays_a_days_drop_to_the_next_round_and_blocks_no_other_reader(
    on_postgres, monkeypatch, caplog
):
    """Dropping a partition takes an exclusive lock on it and on its table. A report that
    holds the table open for minutes must neither make the drop wait for it (every reader
    and writer would queue behind the waiting drop) nor fail the round: the drop gives up
    after LOCK_TIMEOUT, a few times, and the day goes in the next round."""
    import threading

    import psycopg

    monkeypatch.setattr(partitions, "DROP_PAUSE_SECONDS", 0.05)
    table = MeshDelivery._meta.db_table
    make_past_days(table, "delivered_at")
    now = timezone.now()
    with connection.cursor() as cursor:
        for age in (timedelta(days=5), timedelta(0)):
            cursor.execute(
                f"INSERT INTO {table} (message_id, recipient, sender, kind, body, delivered_at) "
                "VALUES (%s, 'b', 'a', 'direct', '{}'::jsonb, %s)",
                [f"m-{age.days}", now - age],
            )
    cut = partitions.day_start(now) - timedelta(days=3)
    old_day = partitions.partition_name(table, partitions.day_start(now - timedelta(days=5)))
    params = connection.get_connection_params()

    # The long reader: a transaction that read the table and stays open.
    reader = psycopg.connect(**params)
    reader.execute(f"SELECT count(*) FROM {table}").fetchone()

    # Meanwhile other readers come and go; none may wait longer than its statement timeout.
    stop, failures, reads = threading.Event(), [], []

    def read_on() -> None:
        with psycopg.connect(**params, autocommit=True) as other:
            other.execute("SET statement_timeout = '5s'")
            while not stop.is_set():
                try:
                    reads.append(other.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                except psycopg.Error as error:
                    failures.append(error)

    others = threading.Thread(target=read_on)
    others.start()
    try:
        with caplog.at_level("WARNING", logger=partitions.logger.name):
            dropped, _ = partitions.partitions_drop_older(table, cut=cut)
    finally:
        reader.rollback()
        reader.close()
    # The others read on while the drop tried; stop them once they have read after it too.
    reads_then = len(reads)
    for _ in range(200):
        if len(reads) > reads_then:
            break
        others.join(0.05)
    stop.set()
    others.join(30)

    assert old_day not in dropped
    assert old_day in {p.name for p in partitions.partitions_of(table)}
    assert any(
        old_day in record.getMessage() and "next round" in record.getMessage()
        for record in caplog.records
    )
    assert failures == []
    assert reads and set(reads) == {2}

    # The report is over: the next round drops the day, and today's row stays.
    dropped, _ = partitions.partitions_drop_older(table, cut=cut)
    assert old_day in dropped
    assert list(MeshDelivery.objects.values_list("message_id", flat=True)) == ["m-0"]
