"""PostgreSQL: the console's queue page reads each group's queue and its bounded count from
`session_queued_idx`, without sorting the queue (100,000 queued chats cost what 100 do)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gloveapp.conversations.models import Session

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_queue_page_reads_the_queue_index_without_a_sort(requires_postgres, customer, bea):
    now = timezone.now()
    Session.objects.bulk_create(
        Session(
            id=f"q{n}",
            key=f"q{n}",
            owner=customer,
            agent_name="obedient",
            answerer="queued",
            answerer_group="baristas",
            answerer_since=now,
        )
        for n in range(30)
    )
    client = Client()
    client.force_login(bea)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/handoffs/").status_code == 200
    queue_reads = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith("SELECT") and "'queued'" in query["sql"]
    ]
    assert len(queue_reads) >= 2, queue_reads  # the page and the counts
    for sql in queue_reads:
        plan = _plan(sql)
        assert "session_queued_idx" in plan, plan
        assert "Sort" not in plan, (sql, plan)
