"""Two Daphne servers and two turn workers sharing PostgreSQL and a Redis of the test's own.

Each test runs on the database queue and on RQ. Messages to one session posted alternately
to both servers run one after another; a prompt a turn shows is answered through the other
server (the answer reaches the worker by PostgreSQL NOTIFY: the workers' safety-net recheck
is off here); a worker killed mid-turn has its turn restarted by the other; a frozen Redis
(SIGSTOP) holds no turn up on the database queue, and on RQ (whose queue it is) holds up
nothing but the turn itself, which runs once Redis is back. The state is read from the
shared database, as the admin would; nothing here waits on a clock but for polling.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest
import redis

from tests.api.liveserver import LiveServer
from tests.conftest import service_missing
from tests.servers import RedisServer

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(300)]

PASSWORD = "pw-ann-processes-1"
# Only in the PostgreSQL pass (`make test` runs it with DATABASE_URL set to PostgreSQL).
PG_URL = os.environ.get("DATABASE_URL", "")
WAIT = 60.0


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        service_missing("redis-server is not installed")
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module", params=["db", "rq"])
def cluster(request, redis_server) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two servers and two workers, on the database queue or on RQ (the test's own Redis)."""
    if not PG_URL.startswith("postgres"):
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    redis_server.thaw()  # whatever the last test left
    redis_server.start()
    redis_url = redis_server.url()
    redis.Redis.from_url(redis_url).flushdb()
    env = {
        "REDIS_URL": redis_url,
        "GLOVE_TASKS_BACKEND": request.param,
        "GLOVE_TURN_LEASE_SECONDS": "2",
        "GLOVE_TURN_DB_THREADS": "2",
        # No safety-net recheck: an answer given through a server reaches the worker
        # running the turn by NOTIFY only.
        "GLOVE_TURN_ANSWER_RECHECK_SECONDS": "3600",
    }
    first = LiveServer(database_url=PG_URL, extra_env=env)
    with first:
        first.add_user("ann", PASSWORD)
        with LiveServer(sharing=first, extra_env=env) as second:
            first.start_worker()
            second.start_worker()
            yield first, second


class Browser:
    """A logged-in user of one server (cookies and CSRF, as a form post sends them)."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.client = httpx.Client(base_url=server.url, timeout=30, follow_redirects=False)
        page = self.client.get("/accounts/login/")
        self.client.post(
            "/accounts/login/",
            data={"username": "ann", "password": PASSWORD, "csrfmiddlewaretoken": _csrf(page)},
        )

    def share_login(self, other: LiveServer) -> Browser:
        twin = Browser.__new__(Browser)
        twin.server = other
        twin.client = httpx.Client(
            base_url=other.url, timeout=30, follow_redirects=False, cookies=self.client.cookies
        )
        return twin

    def new_session(self) -> str:
        response = self.post("/sessions/new", {})
        assert response.status_code == 303, response.text
        return response.headers["Location"].strip("/").split("/")[-1]

    def post(self, path: str, data: dict) -> httpx.Response:
        token = self.client.cookies.get("csrftoken")
        return self.client.post(path, data={**data, "csrfmiddlewaretoken": token})

    def say(self, session_id: str, text: str) -> None:
        assert self.post(f"/sessions/{session_id}/messages", {"text": text}).status_code == 303


def _csrf(page: httpx.Response) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert match, "no CSRF token on the page"
    return match.group(1)


def query(server: LiveServer, sql: str, *args: object) -> list[tuple]:
    with psycopg.connect(server.database_url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def wait_for(server: LiveServer, sql: str, *args: object) -> list[tuple]:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        rows = query(server, sql, *args)
        if rows:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"never true: {sql} {args}\n{server.log_tail()}")


def wait_idle(server: LiveServer, session_id: str) -> None:
    wait_for(
        server,
        "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM turns_turn WHERE session_id = %s "
        "AND status IN ('queued', 'running', 'waiting'))",
        session_id,
    )


def user_and_agent_messages(server: LiveServer, session_id: str) -> list[tuple[str, str]]:
    return query(
        server,
        "SELECT sender, text FROM conversations_message WHERE session_id = %s "
        "AND text <> 'tool results' AND framework_context IS NULL ORDER BY seq",
        session_id,
    )


def waiting_prompt(server: LiveServer, session_id: str) -> tuple[str, str, int]:
    """(public slot id, worker id, turn attempts) of the session's open prompt."""
    turn_id, slot_id, worker_id, attempts = wait_for(
        server,
        "SELECT t.id, s.slot_id, t.worker_id, t.attempts FROM turns_turnslot s "
        "JOIN turns_turn t ON t.id = s.turn_id WHERE s.session_id = %s "
        "AND s.status = 'open' AND s.waits_for_answer AND t.status = 'running'",
        session_id,
    )[0]
    return f"t{turn_id}-{slot_id}", worker_id, attempts


def test_it_runs_messages_posted_to_both_servers_one_after_another(cluster):
    first, second = cluster
    ann = Browser(first)
    ann_on_second = ann.share_login(second)
    session_id = ann.new_session()

    for index in range(4):
        (ann if index % 2 == 0 else ann_on_second).say(session_id, f"hello number {index}")
    wait_idle(first, session_id)

    turns = query(
        first,
        "SELECT status, started_at, finished_at FROM turns_turn WHERE session_id = %s ORDER BY id",
        session_id,
    )
    assert [status for status, _, _ in turns] == ["done"] * 4
    for (_, _, finished), (_, started, _) in itertools.pairwise(turns):
        assert finished <= started  # never two at once
    senders = [sender for sender, _ in user_and_agent_messages(first, session_id)]
    assert senders == ["user", "agent"] * 4
    users = [
        text for sender, text in user_and_agent_messages(first, session_id) if sender == "user"
    ]
    assert users == [f"hello number {index}" for index in range(4)]


def test_it_answers_a_prompt_through_the_other_server(cluster):
    first, second = cluster
    ann = Browser(first)
    session_id = ann.new_session()
    ann.say(session_id, "add 2 Kenya AA")
    wait_idle(first, session_id)
    ann.say(session_id, "checkout, pay at pickup")
    slot_id, _, _ = waiting_prompt(first, session_id)

    response = ann.share_login(second).post(
        f"/sessions/{session_id}/slots/{slot_id}", {"value": "confirm"}
    )
    wait_idle(first, session_id)

    assert response.status_code == 303
    texts = " ".join(text for _, text in user_and_agent_messages(first, session_id))
    assert "Order #" in texts


def test_it_restarts_the_turn_of_a_killed_worker_on_the_other(cluster):
    first, second = cluster
    ann = Browser(first)
    session_id = ann.new_session()
    ann.say(session_id, "add Colombia Huila")
    wait_idle(first, session_id)
    ann.say(session_id, "checkout, pay at pickup")
    _, worker_id, _ = waiting_prompt(first, session_id)

    pid = int(worker_id.split(":")[1])
    victim = next(w for w in first.workers + second.workers if w.pid == pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    wait_for(
        first,
        "SELECT 1 FROM turns_turn WHERE session_id = %s AND attempts = 2 AND status = 'running'",
        session_id,
    )
    slot_id, new_worker, attempts = waiting_prompt(first, session_id)
    page = ann.share_login(second).client.get(f"/sessions/{session_id}/").text
    assert "the turn was restarted" in page
    ann.share_login(second).post(f"/sessions/{session_id}/slots/{slot_id}", {"value": "confirm"})
    wait_idle(first, session_id)

    assert attempts == 2 and new_worker != worker_id
    users = [
        text for sender, text in user_and_agent_messages(first, session_id) if sender == "user"
    ]
    assert users == ["add Colombia Huila", "checkout, pay at pickup"]  # nothing stored twice
    texts = " ".join(text for _, text in user_and_agent_messages(first, session_id))
    assert "Order #" in texts
    table = query(
        first, "SELECT coalesce(to_regclass('live_liveevent'), 'conversations_liveevent')"
    )
    restarted = query(
        first,
        f"SELECT count(*) FROM {table[0][0]} WHERE stream = %s AND type = 'turn.restarted'",
        f"session:{session_id}",
    )
    assert restarted == [(1,)]


def test_a_frozen_redis_holds_up_nothing_but_what_needs_it(cluster, redis_server):
    first, _ = cluster
    on_rq = first.env["GLOVE_TASKS_BACKEND"] == "rq"
    ann = Browser(first)
    session_id = ann.new_session()
    redis_server.freeze()
    try:
        ann.say(session_id, "show me the menu")  # answered: the turn is stored, Redis or not
        if on_rq:
            # RQ's queue is in Redis: the turn waits for it, stored, and is not lost.
            assert query(
                first, "SELECT status FROM turns_turn WHERE session_id = %s", session_id
            ) == [("queued",)]
        else:
            # The database queue needs no Redis: only the live push waits for it.
            wait_idle(first, session_id)
    finally:
        redis_server.thaw()
    wait_idle(first, session_id)

    statuses = query(first, "SELECT status FROM turns_turn WHERE session_id = %s", session_id)
    senders = [sender for sender, _ in user_and_agent_messages(first, session_id)]
    assert statuses == [("done",)]
    assert senders[0] == "user" and "agent" in senders


def test_a_killed_redis_loses_no_turn_and_its_workers_reconnect(cluster, redis_server):
    """Redis killed, a message posted meanwhile, Redis back empty on the same port: the
    message was stored (no 5xx), and the turn runs without restarting anything; on RQ the
    workers reconnect by themselves and a sweep enqueues again what the empty Redis lost."""
    first, second = cluster
    # The cluster is shared by the module's tests, and one of them SIGKILLs a worker.
    alive = [worker for worker in first.workers + second.workers if worker.poll() is None]
    ann = Browser(first)
    session_id = ann.new_session()
    redis_server.kill()
    try:
        ann.say(session_id, "show me the menu")
    finally:
        time.sleep(1)  # the workers' connections fail meanwhile
        redis_server.start()
    wait_idle(first, session_id)

    statuses = query(first, "SELECT status FROM turns_turn WHERE session_id = %s", session_id)
    assert statuses == [("done",)]
    assert all(worker.poll() is None for worker in alive), (
        first.exited_workers() + second.exited_workers()
    )
