"""The page's queries do not grow with its rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.approvals.helpers import open_request

pytestmark = pytest.mark.django_db


def test_the_queue_page_costs_the_same_for_five_rows_or_fifty(session_id, barista):
    client = Client()
    client.force_login(barista)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/approvals/?view=groups").status_code == 200
        return len(captured)

    for _ in range(5):
        open_request(session_id)
    few = queries()
    for _ in range(45):
        open_request(session_id)
    assert queries() == few
