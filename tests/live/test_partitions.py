"""PostgreSQL: the live event log is partitioned by day, and the turn worker's scheduler
drops the expired days (no cron line): the table shrinks at once, and a page resuming from
an event in a dropped day is told to reload (`resync`)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from gloveapp.lib.db import partitions
from gloveapp.live.models import LiveEvent, LiveStreamCounter
from gloveapp.live.streams import session_stream
from tests.helpers import serve_worker_until
from tests.live.conftest import frames, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

TABLE = LiveEvent._meta.db_table
DAYS = 9
ROWS = 30_000


def log_size() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0)::bigint "
            "FROM pg_partition_tree(%s::regclass)",
            [TABLE],
        )
        return cursor.fetchone()[0]


def day_partitions() -> list[partitions.Partition]:
    return [p for p in partitions.partitions_of(TABLE) if not p.default]


def fill_past_days(stream: str) -> int:
    """A log of DAYS days, ROWS rows of one stream spread over them (numbered 1..ROWS, as
    the writers number them); returns the first number of the oldest day."""
    now = timezone.now()
    # The partition of the rows from before partitioning (empty here) makes way for days.
    partitions.partitions_drop_older(TABLE, cut=partitions.day_start(now))
    partitions.partitions_ensure(
        TABLE, column="created_at", now=now - timedelta(days=DAYS), days_ahead=DAYS + 2
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (stream, seq, type, payload, created_at) "
            "SELECT %s, g + 1, 'session.updated', jsonb_build_object('pad', repeat('x', 300)), "
            "  %s - ((%s - 1 - g * %s / %s) * interval '1 day') "
            "FROM generate_series(0, %s - 1) AS g ORDER BY g",
            [stream, now, DAYS, DAYS, ROWS, ROWS],
        )
        cursor.execute("ANALYZE " + TABLE)
    LiveStreamCounter.objects.create(stream=stream, last_seq=ROWS)
    return 1


@pytest.fixture
def on_postgres(requires_postgres, close_worker_connections):
    assert partitions.is_partitioned(TABLE)


@pytest.mark.parametrize("layer", ["memory"], indirect=True)
async def test_the_worker_drops_expired_days_the_log_shrinks_and_an_old_cursor_resyncs(
    on_postgres, layer, settings, chat, owner_cookie
):
    oldest = await sync_to_async(fill_past_days)(session_stream(chat.id))
    before = await sync_to_async(log_size)()
    days_before = await sync_to_async(day_partitions)()
    assert len(days_before) >= DAYS
    settings.GLOVE_RETAIN_LIVE_EVENTS_DAYS = 3
    cut = timezone.now() - timedelta(days=3)

    await serve_worker_until(
        lambda: all(p.upper is None or p.upper > cut for p in day_partitions()),
        worker_id="partitions-test",
        looks=400,
    )

    remaining = await sync_to_async(day_partitions)()
    dropped = {p.name for p in days_before} - {p.name for p in remaining}
    assert len(dropped) >= DAYS - 4
    assert all(p.upper > cut for p in remaining)
    after = await sync_to_async(log_size)()
    assert after < before * 0.6
    # Every event newer than the cut is still there; none of the dropped days' is.
    assert not await LiveEvent.objects.filter(created_at__lt=cut - timedelta(days=1)).aexists()
    assert await LiveEvent.objects.filter(created_at__gte=cut).aexists()
    newest = ROWS  # the stream's last number, kept by its counter

    communicator = await open_socket(chat.id, owner_cookie, last_event_id=oldest)
    [resync] = await frames(communicator, 1)
    assert resync["type"] == "resync"
    assert resync["payload"] == {"reason": "expired", "last_event_id": newest}
    await communicator.disconnect()


async def test_new_events_keep_increasing_ids_across_days(on_postgres):
    from django.db import transaction

    from gloveapp.live.eventlog import record_event

    def write() -> list[int]:
        ids = []
        with transaction.atomic():
            ids.append(record_event(stream="session:a", type="t", payload={}).id)
        # A row moved into yesterday's partition keeps its id; the next one is still higher.
        LiveEvent.objects.filter(pk=ids[0]).update(created_at=timezone.now() - timedelta(days=1))
        with transaction.atomic():
            ids.append(record_event(stream="session:a", type="t", payload={}).id)
        return ids

    first, second = await sync_to_async(write)()

    assert second > first
    assert [pk async for pk in LiveEvent.objects.values_list("id", flat=True)] == [first, second]


async def test_a_row_of_a_day_without_partition_waits_in_default_and_moves_when_its_day_is_made(
    on_postgres,
):
    def write_and_ensure() -> tuple[str, str]:
        later = timezone.now() + timedelta(days=20)
        row = LiveEvent.objects.create(stream="session:a", seq=1, type="t", payload={})
        LiveEvent.objects.filter(pk=row.pk).update(created_at=later)
        before = _partition_of(row.pk)
        partitions.partitions_ensure(TABLE, column="created_at", now=later, days_ahead=0)
        return before, _partition_of(row.pk)

    before, after = await sync_to_async(write_and_ensure)()

    assert before == f"{TABLE}_default"
    assert after == partitions.partition_name(
        TABLE, partitions.day_start(timezone.now() + timedelta(days=20))
    )


def _partition_of(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {TABLE} WHERE id = %s", [pk])
        return cursor.fetchone()[0]
