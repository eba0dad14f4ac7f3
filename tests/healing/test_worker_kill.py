"""SIGKILL of a turn worker under load: its turns are taken back when their lease runs out
and finished by the other worker, each exactly once (nothing stored twice, one reply per
message), on the database queue and on RQ, through PgBouncer in transaction mode.
tests/turns/test_processes.py kills a worker that waits on a prompt; here it dies wherever
it is, in the middle of many turns."""

from __future__ import annotations

import signal
import time

import pytest

from tests.healing.conftest import LEASE_SECONDS
from tests.healing.stack import Browser, Load, check_exactly_once, query, wait_until_finished

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

CHATS = 6
HEAL_WAIT = LEASE_SECONDS + 10 + 60


def test_the_turns_of_a_killed_worker_finish_once_on_the_other(stack):
    server = stack
    ann = Browser(server)
    load = Load(ann, [ann.new_session() for _ in range(CHATS)])
    # Kill a worker while it holds running turns. A turn may end between the look and the
    # kill: then another round, another try (the turns left running by the dead worker are
    # what this test is about).
    orphans: list[tuple[int]] = []
    for attempt in range(3):
        load.post_round(f"{attempt} a")
        load.post_round(f"{attempt} b")
        victim = _kill_a_busy_worker(server)
        killed_at = time.monotonic()
        orphans = query(
            server.database_url,
            "SELECT id FROM turns_turn WHERE status = 'running' AND worker_id = %s",
            victim,
        )
        if orphans:
            break
        server.start_worker()
    assert orphans, "the killed worker never held a running turn at its death"

    finished = wait_until_finished(server.database_url, HEAL_WAIT)
    print(
        f"\n[{server.env['GLOVE_TASKS_BACKEND']}] killed a worker holding {len(orphans)} "
        f"running turns; all {load.count} finished "
        f"{finished if finished is None else round(time.monotonic() - killed_at, 2)} s later "
        f"(promise: the lease, {LEASE_SECONDS} s, plus 10 s)"
    )
    assert finished is not None, "turns left unfinished after a worker was killed"
    check_exactly_once(server.database_url, load)
    retried = query(
        server.database_url,
        "SELECT attempts, status FROM turns_turn WHERE id = ANY(%s)",
        [turn_id for (turn_id,) in orphans],
    )
    assert all(attempts > 1 and status == "done" for attempts, status in retried), retried


def _kill_a_busy_worker(server) -> str:
    """SIGKILL the worker holding the most running turns; its worker id."""
    deadline = time.monotonic() + 30
    holders: list[tuple[str, int]] = []
    while time.monotonic() < deadline and not holders:
        holders = query(
            server.database_url,
            "SELECT worker_id, count(*) FROM turns_turn WHERE status = 'running' "
            "GROUP BY 1 ORDER BY 2 DESC",
        )
        time.sleep(0.005)
    if not holders:  # say what the turns and the workers were doing
        turns = query(server.database_url, "SELECT status, count(*) FROM turns_turn GROUP BY 1")
        pytest.fail(f"no turn ever ran; turns by status: {turns}\n{server.worker_logs()}")
    worker_id = holders[0][0]
    pid = int(worker_id.split(":")[1])
    victim = next(worker for worker in server.workers if worker.pid == pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    return worker_id


@pytest.fixture
def stack(stack):
    """The backend's stack, two workers again afterwards (the next test may count them)."""
    yield stack
    while sum(worker.poll() is None for worker in stack.workers) < 2:
        stack.start_worker()
