"""PostgreSQL: the turns table's few indexes serve the turn path, and a heartbeat is a HOT
update (no index entry written), since no index covers the lease; a chat page's notes and
edits are read from their own small indexes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.approvals.selectors import session_edits
from gloveapp.conversations.models import Session
from gloveapp.turns import claim, leases, submit
from gloveapp.turns.models import Turn
from gloveapp.turns.selectors import ended_turn_notes

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
    submit.turn_submit(session_id="chat", text="hello", user_id=user.pk, source="page")
    return claim.turn_claim_next(session_id="chat", worker_id="w1")


def test_a_heartbeat_is_a_hot_update(running_turn):
    updates, hot = turn_table_updates()

    for _ in range(5):
        assert leases.turns_heartbeat(turn_ids=[running_turn.pk], worker_id="w1") == {
            running_turn.pk
        }

    updates_after, hot_after = turn_table_updates()
    assert updates_after - updates == 5
    assert hot_after - hot == 5


def test_the_turns_table_keeps_ten_indexes_none_on_the_lease(running_turn):
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'turns_turn'")
        definitions = [row[0] for row in cursor.fetchall()]

    assert len(definitions) == 10
    assert not [d for d in definitions if "lease_until" in d]
    # (session, id), the unfinished turns', the running one's, the ended-with-a-note ones'.
    assert len([d for d in definitions if "(session_id" in d]) == 4
    # The admin's filters: the finished turns by status, by source, the retried ones.
    assert len([d for d in definitions if "(status, id)" in d or "(source, id)" in d]) == 2


def test_the_newest_turn_and_the_claim_read_an_index(running_turn):
    newest = Turn.objects.filter(session_id="chat").order_by("-id")[:1]
    unfinished = Turn.objects.filter(session_id="chat", status__in=["queued", "running"])
    stale = Turn.objects.filter(status="running", lease_until__lt=timezone.now())

    assert "turn_session_newest_idx" in plan(newest)
    assert "turn_session_unfinished_idx" in plan(unfinished)
    assert "one_running_turn_per_session" in plan(stale)


@pytest.fixture
def long_chat(running_turn) -> str:
    """The chat with 3,000 finished turns and 3,000 approved requests besides (a long chat's
    shape, analysed: on a near-empty table any index serves, so plans say nothing)."""
    ApprovalRequest.objects.bulk_create(
        ApprovalRequest(
            session_id="chat",
            tool_name="checkout",
            call_id=f"call_{n}",
            args={},
            fingerprint="f",
            decisions=["approve", "edit", "reject"],
            status="decided",
            decision="approve",
            created_at=timezone.now(),
        )
        for n in range(3000)
    )
    Turn.objects.bulk_create(
        Turn(session_id="chat", text="hi", status="done", base_seq=4 * n, end_seq=4 * n + 4)
        for n in range(3000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE turns_turn")
        cursor.execute("ANALYZE approvals_approvalrequest")
    return "chat"


def plans_of(read) -> list[str]:
    """The plans of the statements `read()` sends."""
    with CaptureQueriesContext(connection) as captured:
        read()
    found = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            cursor.execute("EXPLAIN " + query["sql"])
            found.append("\n".join(row[0] for row in cursor.fetchall()))
    return found


def test_a_pages_stopped_and_failed_turns_and_edited_calls_are_read_from_their_own_indexes(
    long_chat,
):
    # A chat page reads only these, never the chat's every turn and decided request
    # (bench/scale.py: 49 ms and 0.47 s of a 100,000-message chat's page read them all).
    (notes,) = plans_of(lambda: ended_turn_notes(long_chat, from_seq=40, to_seq=90))
    (edits,) = plans_of(lambda: session_edits(long_chat, ["call_1", "call_2"]))

    assert "turn_session_note_idx" in notes
    assert "approval_session_edit_idx" in edits
    # A page without tool calls asks for no edits at all.
    assert plans_of(lambda: session_edits(long_chat, [])) == []
