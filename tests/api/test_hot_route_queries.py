"""The remote store's hot routes answer in one or two queries (issue 13).

A token already checked is answered from the process's memory for a few seconds; the
ownership check rides along with the history read, or is the only other query.
"""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from gloveapp.api.common.token_auth import CachedTokenAuthentication

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

ONE_MESSAGE = {"messages": [{"sender": "user", "text": "A flat white, please."}]}


@pytest.fixture
def warm(owner_client, session_id):
    """The owner has made one request already, so its token is known to this process."""
    assert owner_client.get(f"/api/sessions/{session_id}/tokens").status_code == 200
    return owner_client


def test_it_reads_a_history_in_one_query(warm, session_id, django_assert_max_num_queries):
    for _ in range(3):
        warm.post(f"/api/sessions/{session_id}/messages", ONE_MESSAGE, format="json")

    with django_assert_max_num_queries(1):
        response = warm.get(f"/api/sessions/{session_id}/messages")

    assert [m["text"] for m in response.json()] == ["A flat white, please."] * 3


def test_it_reads_an_empty_history_in_one_query(warm, session_id, django_assert_max_num_queries):
    with django_assert_max_num_queries(1):
        response = warm.get(f"/api/sessions/{session_id}/messages")

    assert response.status_code == 200
    assert response.json() == []


def test_it_reads_since_compaction_in_two_queries(warm, session_id, django_assert_max_num_queries):
    warm.post(f"/api/sessions/{session_id}/messages", ONE_MESSAGE, format="json")
    summary = {"messages": [{"sender": "user", "text": "Summary", "is_compaction": True}]}
    warm.post(f"/api/sessions/{session_id}/messages", summary, format="json")
    warm.post(f"/api/sessions/{session_id}/messages", ONE_MESSAGE, format="json")

    with django_assert_max_num_queries(2):
        response = warm.get(f"/api/sessions/{session_id}/messages?since_compaction=true")

    assert [m["text"] for m in response.json()] == ["Summary", "A flat white, please."]


def test_it_appends_in_two_queries_on_postgresql(warm, session_id, django_assert_max_num_queries):
    # SQLite has no data-modifying CTEs: there the append is four local statements in one
    # transaction (a savepoint here, inside the test's transaction), the stream's counter
    # of event numbers advanced by one of them.
    with django_assert_max_num_queries(2 if connection.vendor == "postgresql" else 7):
        response = warm.post(f"/api/sessions/{session_id}/messages", ONE_MESSAGE, format="json")

    assert response.json() == {"ok": True}
    assert len(warm.get(f"/api/sessions/{session_id}/messages").json()) == 1


@pytest.mark.parametrize("route", ["inbox", "tokens"])
def test_it_reads_inbox_and_tokens_in_two_queries(
    warm, session_id, route, django_assert_max_num_queries
):
    with django_assert_max_num_queries(2):
        response = warm.get(f"/api/sessions/{session_id}/{route}")

    assert response.status_code == 200


def test_it_still_answers_an_outsider_404_in_one_query(
    other_client, session_id, django_assert_max_num_queries
):
    other_client.get("/api/sessions")  # the outsider's token is known too
    with django_assert_max_num_queries(1):
        response = other_client.get(f"/api/sessions/{session_id}/messages")

    assert response.status_code == 404


def test_it_forgets_a_deleted_token_at_once(warm, owner, session_id):
    Token.objects.filter(user=owner).get().delete()

    assert warm.get(f"/api/sessions/{session_id}/messages").status_code == 401


def test_it_forgets_a_deactivated_user_at_once(warm, owner, session_id):
    owner.is_active = False
    owner.save()

    assert warm.get(f"/api/sessions/{session_id}/messages").status_code == 401


def test_it_checks_an_unknown_token_every_time(db, settings):
    authentication = CachedTokenAuthentication()
    for _ in range(2):
        with pytest.raises(Exception, match="Invalid token"):
            authentication.authenticate_credentials("not-a-token")


def _prepared_here() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return {" ".join(row[0].split()) for row in cursor.fetchall()}


def test_it_prepares_the_hot_statements_once_per_connection(warm, session_id, requires_postgres):
    for _ in range(3):
        warm.post(f"/api/sessions/{session_id}/messages", ONE_MESSAGE, format="json")
        warm.get(f"/api/sessions/{session_id}/messages")

    prepared = _prepared_here()
    # Planned once on this connection, then only executed: the append, the history read,
    # the ownership probe (each once, however often it ran).
    for start in ("WITH s AS ( UPDATE", "SELECT m.seq, m.wire", "SELECT id FROM"):
        assert len([s for s in prepared if s.startswith(start)]) == 1, (start, prepared)


def test_it_plans_every_statement_anew_with_prepared_statements_off(
    warm, session_id, settings, requires_postgres
):
    settings.GLOVE_PREPARED_STATEMENTS = False
    before = _prepared_here()
    warm.post(f"/api/sessions/{session_id}/messages", ONE_MESSAGE, format="json")

    assert warm.get(f"/api/sessions/{session_id}/messages").json()[-1]["text"] == (
        "A flat white, please."
    )
    assert _prepared_here() == before
