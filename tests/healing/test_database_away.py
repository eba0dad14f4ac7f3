"""While PostgreSQL is away, requests that need it answer 503 with Retry-After, never 500.

A server on a PostgreSQL of the test's own (tests/servers.py); the database is stopped: an
API call and a page that need it answer 503 (JSON on the API, text elsewhere) with
Retry-After, and once the database is back the same requests answer as before, with no
process restarted.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.api.liveserver import LiveServer
from tests.conftest import service_missing
from tests.healing.stack import PASSWORD, Browser
from tests.servers import PostgresServer, pg_bindir

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]


def until(condition, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def test_requests_answer_503_with_retry_after_while_the_database_is_away():
    if pg_bindir() is None:
        service_missing("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    with PostgresServer() as postgres:
        with LiveServer(database_url=postgres.url(), extra_env={"REDIS_URL": ""}) as server:
            server.manage(
                "shell",
                "-c",
                "from django.contrib.auth import get_user_model; "
                f"get_user_model().objects.create_user('ann', password='{PASSWORD}')",
            )
            token = server.token_for("ann")
            browser = Browser(server)
            assert browser.client.get("/").status_code == 200
            api = httpx.Client(
                base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=30
            )
            assert api.get("/api/sessions").status_code == 200

            postgres.stop()
            try:
                answer = until(lambda: (r := api.get("/api/sessions")).status_code != 200 and r)
                assert answer.status_code == 503, answer.text
                assert answer.headers["Retry-After"] == "2"
                assert "database is unavailable" in answer.json()["error"]
                page = browser.client.get("/")  # the chat list: the session, then the chats
                assert page.status_code == 503, page.text
                assert page.headers["Retry-After"] == "2"
                assert page.headers["Content-Type"].startswith("text/plain")
            finally:
                postgres.start()

            healed = until(lambda: api.get("/api/sessions").status_code == 200)
            assert healed, "the server did not answer again after the database came back"
            assert until(lambda: browser.client.get("/").status_code == 200)
