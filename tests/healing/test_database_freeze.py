"""While PostgreSQL is frozen (SIGSTOP: connections open, nothing answers, nothing cancels),
requests answer 503 with Retry-After within the bounded waits instead of hanging.

A server on a PostgreSQL of the test's own, its waits set short: a statement's answer
(GLOVE_DB_WAIT_SECONDS, past which the connection is cut) and a connection's (the pool's
wait, a new connection's handshake: GLOVE_DB_CONNECT_TIMEOUT_SECONDS). The database is
frozen with the server's pooled connections open: the first requests find one of them and
wait for an answer, the next ones wait for a new connection; each answers 503 with
Retry-After (JSON on the API, text on a page). Once the database thaws the same requests
answer as before, with no process restarted. A client that waited longer than the bound
plus a margin fails the test by its own timeout (it would have hung before).

Through PgBouncer in transaction mode (the production topology) and directly: PgBouncer
answers a new connection itself, so only the direct server shows the bounded handshake.
"""

from __future__ import annotations

import contextlib

import httpx
import pytest

from tests.api.liveserver import LiveServer
from tests.conftest import service_missing
from tests.healing.conftest import add_user
from tests.healing.stack import PASSWORD, Browser, until
from tests.servers import PgBouncer, PostgresServer, pg_bindir, pgbouncer_binary, through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

STATEMENT_SECONDS = 2
CONNECT_SECONDS = 2
# What a request may wait at most: a statement's answer (statement timeout + 2 s), or the
# pool's wait for a connection; the client gives up well past it.
BOUND = STATEMENT_SECONDS + 2
CLIENT_TIMEOUT = BOUND + 20


@pytest.mark.parametrize("way", ["direct", "pgbouncer"])
def test_a_frozen_database_answers_503_with_retry_after_instead_of_hanging(way):
    if pg_bindir() is None:
        service_missing("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    if way == "pgbouncer" and pgbouncer_binary() is None:
        service_missing("pgbouncer is not installed (apt-get install pgbouncer)")
    with contextlib.ExitStack() as started:
        postgres = started.enter_context(PostgresServer())
        env = {
            "REDIS_URL": "",
            "GLOVE_DB_STATEMENT_TIMEOUT_SECONDS": str(STATEMENT_SECONDS),
            "GLOVE_DB_CONNECT_TIMEOUT_SECONDS": str(CONNECT_SECONDS),
        }
        server = LiveServer(database_url=postgres.url(), extra_env=env)
        if way == "pgbouncer":
            through_pgbouncer(server, started.enter_context(PgBouncer(postgres)))
        with server:
            add_user(server.database_url, "ann", PASSWORD)
            token = server.token_for("ann")
            browser = Browser(server)
            browser.client.timeout = httpx.Timeout(CLIENT_TIMEOUT)
            assert browser.client.get("/").status_code == 200
            api = httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Token {token}"},
                timeout=CLIENT_TIMEOUT,
            )
            assert api.get("/api/sessions").status_code == 200

            postgres.freeze()
            try:
                answers = [api.get("/api/sessions") for _ in range(3)]
                page = browser.client.get("/")
            finally:
                postgres.thaw()

            for answer in answers:
                assert answer.status_code == 503, answer.text
                assert answer.headers["Retry-After"] == "2"
                assert answer.json()["error"].startswith("The database is unavailable")
            assert page.status_code == 503, page.text
            assert page.headers["Retry-After"] == "2"

            back = until(lambda: api.get("/api/sessions").status_code == 200, interval=0.2)
            assert back, server.log_tail()
            assert browser.client.get("/").status_code == 200
