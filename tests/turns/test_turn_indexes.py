"""PostgreSQL: the turns table's few indexes serve the turn path, and a heartbeat is a HOT
update (no index entry written), since no index covers the lease."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from gloveapp.conversations.models import Session
from gloveapp.turns import services
from gloveapp.turns.models import Turn

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def turn_table_updates() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'turns_turn'"
        )
        return cursor.fetchone()


def plan(queryset) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            return queryset.explain()
        finally:
            cursor.execute("SET enable_seqscan = on")


@pytest.fixture
def running_turn(requires_postgres) -> Turn:
    user = get_user_model().objects.create_user("owner")
    Session.objects.create(id="chat", key="chat", owner=user)
    services.turn_submit(session_id="chat", text="hello", user_id=user.pk, source="page")
    return services.turn_claim_next(session_id="chat", worker_id="w1")


def test_a_heartbeat_is_a_hot_update(running_turn):
    updates, hot = turn_table_updates()

    for _ in range(5):
        assert services.turns_heartbeat(turn_ids=[running_turn.pk], worker_id="w1") == {
            running_turn.pk
        }

    updates_after, hot_after = turn_table_updates()
    assert updates_after - updates == 5
    assert hot_after - hot == 5


def test_the_turns_table_keeps_six_indexes_none_on_the_lease(running_turn):
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'turns_turn'")
        definitions = [row[0] for row in cursor.fetchall()]

    assert len(definitions) == 6
    assert not [d for d in definitions if "lease_until" in d]
    assert len([d for d in definitions if "(session_id" in d]) == 3


def test_the_newest_turn_and_the_claim_read_an_index(running_turn):
    newest = Turn.objects.filter(session_id="chat").order_by("-id")[:1]
    unfinished = Turn.objects.filter(session_id="chat", status__in=["queued", "running"])
    stale = Turn.objects.filter(status="running", lease_until__lt=timezone.now())

    assert "turn_session_newest_idx" in plan(newest)
    assert "turn_session_unfinished_idx" in plan(unfinished)
    assert "one_running_turn_per_session" in plan(stale)
