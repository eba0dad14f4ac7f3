"""While PostgreSQL is away, requests that need it answer 503 with Retry-After, never 500.

A server on a PostgreSQL of the test's own (tests/servers.py), through PgBouncer in
transaction mode (the production topology: PgBouncer stays up and answers for the database
stopped behind it). While the database is stopped, an API call and a page that need it
answer 503 (JSON on the API, text elsewhere) with Retry-After, and once the database is
back the same requests answer as before, with no process restarted. A websocket opened meanwhile is closed with 4503 and `retry_after`.
"""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.api.liveserver import LiveServer, add_user
from tests.conftest import service_missing
from tests.healing.stack import PASSWORD, Browser, until
from tests.servers import PgBouncer, PostgresServer, pg_bindir, pgbouncer_binary, through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]


def _needs_servers() -> None:
    if pg_bindir() is None:
        service_missing("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    if pgbouncer_binary() is None:
        service_missing("pgbouncer is not installed (apt-get install pgbouncer)")


def test_requests_answer_503_with_retry_after_while_the_database_is_away():
    _needs_servers()
    with PostgresServer() as postgres, PgBouncer(postgres) as bouncer:
        server = LiveServer(database_url=postgres.url(), extra_env={"REDIS_URL": ""})
        with through_pgbouncer(server, bouncer):
            add_user(server.database_url, "ann", PASSWORD)
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


async def _socket_outcome(server: LiveServer, cookie: str, path: str, then=None) -> tuple:
    """Open a socket on `path` with the login cookie: ("closed", code, reason) when the
    server closes it, else ("frame", the first frame) after `then()` made something happen."""
    try:
        async with connect(
            f"ws://127.0.0.1:{server.port}{path}",
            additional_headers={
                "Cookie": f"sessionid={cookie}",
                "Origin": f"http://127.0.0.1:{server.port}",
            },
            open_timeout=30,
        ) as socket:
            if then is not None:
                await asyncio.to_thread(then)
            frame = await asyncio.wait_for(socket.recv(), 30)
            return ("frame", json.loads(frame))
    except ConnectionClosed as closed:
        return (
            "closed",
            closed.rcvd.code if closed.rcvd else None,
            closed.rcvd and closed.rcvd.reason,
        )
    except InvalidStatus as refused:
        return ("refused", refused.response.status_code)


@pytest.mark.parametrize("server_kind", ["uvicorn", "daphne"])
def test_a_socket_opened_while_the_database_is_away_is_told_when_to_come_back(server_kind):
    """Not a failed handshake (a 500, which a browser retries blindly): the socket opens and
    closes with 4503 and `retry_after`, and once the database is back a socket works."""
    _needs_servers()
    with PostgresServer() as postgres, PgBouncer(postgres) as bouncer:
        server = LiveServer(
            database_url=postgres.url(), extra_env={"REDIS_URL": ""}, server=server_kind
        )
        with through_pgbouncer(server, bouncer):
            add_user(server.database_url, "ann", PASSWORD)
            browser = Browser(server)
            session_id = browser.new_session()
            cookie = browser.client.cookies.get("sessionid")
            path = f"/ws/sessions/{session_id}/"

            def say(text: str):
                return lambda: browser.post(f"/sessions/{session_id}/messages", {"text": text})

            before = asyncio.run(_socket_outcome(server, cookie, path, then=say("hello")))
            assert before[0] == "frame", before

            postgres.stop()
            try:
                away = asyncio.run(_socket_outcome(server, cookie, path))
                # Daphne (`make run`) sends no close reason; uvicorn (`make serve-prod`) does.
                reason = "retry_after=5" if server_kind == "uvicorn" else ""
                assert away == ("closed", 4503, reason), away
            finally:
                postgres.start()

            back = until(
                lambda: (
                    (
                        outcome := asyncio.run(
                            _socket_outcome(server, cookie, path, then=say("again"))
                        )
                    )[0]
                    == "frame"
                    and outcome
                )
            )
            assert back and back[0] == "frame", back


def test_postgresql_restarts_behind_pgbouncer_under_requests_answer_no_500():
    """Requests in flight while PostgreSQL restarts behind PgBouncer meet whatever a cut
    connection raises through psycopg (OperationalError, or PgBouncer's "received 2 results
    from command 'BEGIN'", an InternalError): each is a 503 with Retry-After or an answer,
    never a 500, over several restarts, and the server answers again after each."""
    _needs_servers()
    with PostgresServer() as postgres, PgBouncer(postgres) as bouncer:
        server = LiveServer(
            database_url=postgres.url(), extra_env={"REDIS_URL": "", "DB_POOL_SIZE": "4"}
        )
        with through_pgbouncer(server, bouncer):
            token = server.token_for("ann")
            headers = {"Authorization": f"Token {token}"}
            api = httpx.Client(base_url=server.url, headers=headers, timeout=30)
            session_id = api.post("/api/sessions", json={"title": "t"}).json()["sessionId"]
            statuses: list[int] = []
            unhinted: list[int] = []
            stop = threading.Event()

            def load() -> None:
                with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
                    while not stop.is_set():
                        for answer in (
                            client.get(f"/api/sessions/{session_id}/messages"),
                            client.post(
                                f"/api/sessions/{session_id}/messages",
                                json={"messages": [{"sender": "user", "text": "hi"}]},
                            ),
                            client.get("/api/sessions"),
                        ):
                            statuses.append(answer.status_code)
                            if answer.status_code == 503 and "Retry-After" not in answer.headers:
                                unhinted.append(answer.status_code)

            threads = [threading.Thread(target=load) for _ in range(3)]
            for thread in threads:
                thread.start()
            try:
                for _ in range(3):
                    until(lambda: len(statuses) > 20)
                    postgres.restart()
                    served = len(statuses)
                    healed = until(lambda served=served: statuses[served:].count(200) > 10)
                    assert healed, statuses[-50:]
            finally:
                stop.set()
                for thread in threads:
                    thread.join()

            assert statuses.count(500) == 0, server.log_tail()
            assert not unhinted
            assert set(statuses) <= {200, 503}, sorted(set(statuses))
            assert api.get("/api/sessions").status_code == 200
