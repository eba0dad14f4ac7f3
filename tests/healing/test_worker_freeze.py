"""A turn worker frozen (SIGSTOP) past its lease, mid-turn: the other worker takes the turn
back and finishes it; when the frozen one resumes (SIGCONT), its turn must store nothing
more (its model call came back meanwhile, its reply ready), only stop. Every write of a
turn is fenced by the turn still being this worker's (`turns.fence.turn_fence`).
Nothing lost, nothing duplicated, nothing stuck."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.liveserver import LiveServer
from tests.healing.conftest import add_user
from tests.healing.slow_model import SLOW_SECONDS
from tests.healing.stack import (
    PASSWORD,
    Browser,
    Load,
    check_exactly_once,
    query,
    wait_until_finished,
)
from tests.servers import through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

LEASE_SECONDS = 2
WAIT = 60.0


@pytest.fixture
def slow_stack(postgres, pgbouncer) -> Iterator[LiveServer]:
    """A server and two workers whose model takes longer than the lease (database queue:
    the fault is the worker's, whichever queue brought the turn), through PgBouncer."""
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.healing.slow_model",
        "GLOVE_TASKS_BACKEND": "db",
        "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
        "GLOVE_TURN_DB_THREADS": "2",
        "REDIS_URL": "",
    }
    server = through_pgbouncer(LiveServer(database_url=postgres.url(), extra_env=env), pgbouncer)
    with server:
        add_user(server.database_url, "ann", PASSWORD)
        server.start_worker()
        server.start_worker()
        yield server


def _until(what: str, check, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _freeze_outside_a_transaction(worker, database_url: str) -> None:
    """SIGSTOP `worker` at a moment it holds no transaction open. A worker stopped inside
    one (a lease renewal, the scheduler's retention) keeps its locks and, behind PgBouncer,
    its server connection: the other worker then waits on them instead of taking the turn
    back, which is another fault than the one tested. So: stop it, look for a transaction
    left idle on the database, and if there is one let it run a moment and stop it again."""
    for _ in range(20):
        worker.send_signal(signal.SIGSTOP)
        time.sleep(0.3)
        (held,) = query(
            database_url,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() "
            "AND state IN ('idle in transaction', 'idle in transaction (aborted)') "
            "AND state_change < now() - interval '0.2 seconds'",
        )[0]
        if not held:
            return
        worker.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the worker was never outside a transaction when stopped")


def test_a_frozen_worker_stores_nothing_once_its_turn_was_taken_back(slow_stack):
    server = slow_stack
    ann = Browser(server)
    load = Load(ann, [ann.new_session()])
    load.post_round("frozen")
    session_id = load.sessions[0]

    # Frozen once its request is stored: the worker is then in its model call (for
    # SLOW_SECONDS), in no transaction (a worker frozen inside one holds its locks, and
    # holds up every writer of the session until it resumes: not the fault tested here).
    turn_id, holder = _until(
        "the turn runs and its request is stored",
        lambda: query(
            server.database_url,
            "SELECT t.id, t.worker_id FROM turns_turn t WHERE t.session_id = %s "
            "AND t.status = 'running' AND EXISTS (SELECT 1 FROM conversations_message m "
            "WHERE m.session_id = t.session_id AND m.sender = 'user')",
            session_id,
        ),
    )[0]
    pid = int(holder.split(":")[1])
    index, frozen = next((i, w) for i, w in enumerate(server.workers) if w.pid == pid)
    _freeze_outside_a_transaction(frozen, server.database_url)
    try:
        # The other worker takes the turn back after the lease and answers it.
        _until(
            "the other worker finishes the turn",
            lambda: query(
                server.database_url,
                "SELECT 1 FROM turns_turn WHERE id = %s AND status = 'done' AND worker_id <> %s",
                turn_id,
                holder,
            ),
        )
    finally:
        frozen.send_signal(signal.SIGCONT)
    log = Path(server._folder) / f"worker{index}.log"
    _until(
        "the resumed worker sees it lost the turn",
        lambda: f"lost the lease of turn {turn_id}" in log.read_text(errors="replace"),
    )
    # Whatever its turn had in flight when it froze comes back at once (its model call's
    # wait ran out meanwhile); a model call after that would take SLOW_SECONDS.
    time.sleep(SLOW_SECONDS + 1)

    assert wait_until_finished(server.database_url, WAIT) is not None
    rows = query(
        server.database_url,
        "SELECT sender, tool_calls, tool_results FROM conversations_message "
        "WHERE session_id = %s AND framework_context IS NULL ORDER BY seq",
        session_id,
    )
    replies = sum(1 for sender, calls, _ in rows if sender == "agent" and not calls)
    results = sum(len(results or []) for _, _, results in rows)
    said = [line for line in log.read_text(errors="replace").splitlines() if "lease" in line]
    print(f"\n{len(rows)} messages, {replies} agent replies, {results} tool results: {rows}")
    print("the resumed worker:", said)
    attempts = query(
        server.database_url, "SELECT status, attempts FROM turns_turn WHERE id = %s", turn_id
    )
    assert attempts == [("done", 2)], attempts
    assert replies == 1, rows
    check_exactly_once(server.database_url, load)
    assert frozen.poll() is None, "the resumed worker went on serving"
