"""The page's queries do not grow with its rows, and its rows show what the API says."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.approvals.selectors import VIEWS
from tests.approvals.helpers import open_request

pytestmark = pytest.mark.django_db

# The session, the user, the live cursor, the page's rows (one statement: its ids a
# subquery), the layout's unread badge.
MOST_QUERIES = 5


def test_the_queue_pages_cost_the_same_for_five_rows_or_fifty(session_id, barista):
    client = Client()
    client.force_login(barista)

    def queries() -> dict[str, int]:
        counts = {}
        for view in VIEWS:
            for part in ("", "&part=rows"):
                with CaptureQueriesContext(connection) as captured:
                    response = client.get(f"/approvals/?view={view}{part}")
                    assert response.status_code == 200
                counts[view + part] = len(captured)
        return counts

    for _ in range(5):
        open_request(session_id, assignee_group="baristas")
    few = queries()
    for _ in range(45):
        open_request(session_id, assignee_group="baristas", escalate_after=1)
    many = queries()
    assert many == few
    assert max(many.values()) <= MOST_QUERIES


def _rows(html: str) -> dict[str, str]:
    """Each `<li>` of the list by its request id, its text with the tags removed."""
    return {
        found.group(1): " ".join(re.sub(r"<[^>]+>", " ", found.group(2)).split())
        for found in re.finditer(r'<li [^>]*data-id="([^"]+)"[^>]*>(.*?)</li>', html, re.S)
    }


def test_a_row_shows_its_customer_summary_total_assignee_escalation_and_time_left(
    session_id, barista, manager
):
    mine = open_request(session_id, assignee_user="bea")
    shared = open_request(session_id, assignee_group=None)
    escalated = open_request(
        session_id, assignee_group="baristas", escalate_after=1, escalate_to_group="managers"
    )
    ApprovalRequest.objects.filter(pk=escalated.pk).update(escalated_at=timezone.now())
    client = Client()
    client.force_login(barista)
    page = client.get("/approvals/?view=all").content.decode()
    rows = _rows(page)
    assert list(rows) == [str(mine.pk), str(shared.pk), str(escalated.pk)]
    # Who asks, what the call does and its total, in words: not the tool's name or JSON.
    assert rows[str(mine.pk)].startswith("nina · Place order")
    assert "Wholesale: 12 bags of Yirgacheffe" in rows[str(mine.pk)]
    assert "$120.00 · @bea" in rows[str(mine.pk)]
    assert rows[str(mine.pk)].endswith("@bea")
    assert rows[str(shared.pk)].endswith("unassigned")
    assert rows[str(escalated.pk)].endswith("baristas · escalated to managers")
    assert re.search(r"\d+s left", rows[str(mine.pk)])
    assert f'href="?request={mine.pk}"' in page
    assert f'data-detail-url="/approvals/{mine.pk}"' in page
    # The same rows for the "more" request and for one row after a live update.
    more = client.get("/approvals/?view=all&part=rows").content.decode()
    assert _rows(more) == rows
    one = client.get(f"/approvals/{mine.pk}?part=row").content.decode()
    assert _rows(one) == {str(mine.pk): rows[str(mine.pk)]}


def test_names_are_escaped_in_the_rows(session_id, barista):
    barista.groups.create(name="<b>night</b> & co")
    open_request(session_id, assignee_group="<b>night</b> & co")
    client = Client()
    client.force_login(barista)
    page = client.get("/approvals/?view=groups").content.decode()
    assert "&lt;b&gt;night&lt;/b&gt; &amp; co" in page
    assert "<b>night</b>" not in page
