"""Replay and publishing survive a worker's death: a server and two `manage.py turn_worker`
processes on a database of their own (tests/api/liveserver.py; PostgreSQL in the PostgreSQL
pass, else a SQLite file), the scripted shop agent (tests/versions/live_settings.py).

- A worker SIGKILLed in the middle of a replay batch: the run stalls, the other worker's
  scheduler hands it on after GLOVE_REPLAY_STALLED_SECONDS, and the run finishes there with
  every conversation's result stored once and counted once, nothing left queued or running
  (the dead worker's task row is failed, naming why).
- A worker SIGKILLed as a publication's approval is decided: the version is published once,
  by whichever worker's scheduler settles it.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time

import pytest
from django.db import connection

from tests.api.liveserver import PYTHON, ROOT, LiveServer
from tests.healing.stack import until

pytestmark = [pytest.mark.faults, pytest.mark.process, pytest.mark.timeout(300)]

CONVERSATIONS = 150  # three batches of 50
# Seconds per model call of the replayed version: a batch takes a few seconds, long
# enough to kill its worker in the middle of one.
DELAY = "0.02"
STALLED_SECONDS = 3


@pytest.fixture
def server(transactional_db):
    database_url = None
    if connection.vendor == "postgresql":
        params = connection.settings_dict
        database_url = f"postgres://{params['USER']}@{params['HOST']}:{params['PORT']}/postgres"
    with LiveServer(
        database_url=database_url,
        extra_env={
            "DJANGO_SETTINGS_MODULE": "tests.versions.live_settings",
            "GLOVE_REPLAY_STALLED_SECONDS": str(STALLED_SECONDS),
            "GLOVE_APPROVAL_SWEEP_SECONDS": "0.5",
            "GLOVE_RETENTION_SECONDS": "0",
            "GLOVE_TASKS_BACKEND": "db",
            "REDIS_URL": "",
        },
    ) as live:
        yield live


def query(server: LiveServer, sql: str) -> list[tuple]:
    """A read of the server's database from outside it (no parameters: both databases)."""
    url = server.database_url
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30) as conn:
            return conn.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        return conn.execute(sql).fetchall()


def step(server: LiveServer, *args: str):
    """One step of tests/versions/live.py in the server's database; its JSON answer."""
    done = subprocess.run(
        [PYTHON, "-m", "tests.versions.live", *args],
        cwd=ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def running_replay_workers(server: LiveServer) -> list[str]:
    """The workers holding a replay batch now (the queue's running task rows)."""
    rows = query(
        server,
        "SELECT worker_ids FROM django_tasks_database_dbtaskresult "
        "WHERE status = 'RUNNING' AND task_path LIKE '%replay_run_task'",
    )
    return [(ids if isinstance(ids, list) else json.loads(ids))[-1] for (ids,) in rows if ids]


def run_row(server: LiveServer) -> tuple:
    (row,) = query(server, "SELECT status, done, total, diverged FROM versions_replayrun")
    return row


def test_a_replay_whose_worker_is_killed_mid_batch_finishes_on_the_other_once(server):
    ids = step(server, "record", str(CONVERSATIONS), DELAY)
    first = server.start_worker()
    server.start_worker()
    server.manage("replay_agent", "shop", "--ids", ",".join(ids), "--enqueue")

    # Kill the worker holding a batch once the run is under way (a batch stored, more to
    # go), so it dies in the middle of the next one.
    holder = until(
        lambda: run_row(server)[1] > 0 and running_replay_workers(server),
        timeout=120,
        interval=0.02,
    )
    assert holder, f"no batch ran: {run_row(server)}\n{server.worker_logs()}"
    pid = int(holder[0].split(":")[1])
    victim = next(worker for worker in server.workers if worker.pid == pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = time.monotonic()
    at_death = run_row(server)
    assert at_death[0] == "running" and at_death[1] < CONVERSATIONS, at_death
    if victim is first:  # the survivor is the other one; two workers again for the rest
        server.start_worker()

    finished = until(lambda: run_row(server)[0] == "done", timeout=120)
    healed = round(time.monotonic() - killed_at, 1)
    print(
        f"\nkilled the worker of a replay batch at {at_death[1]}/{CONVERSATIONS}; "
        f"finished {healed} s later (promise: GLOVE_REPLAY_STALLED_SECONDS={STALLED_SECONDS} "
        f"plus the sweep and the batches left)"
    )
    assert finished, f"{run_row(server)}\n{server.worker_logs()}"
    status, done, total, diverged = run_row(server)
    assert (status, done, total, diverged) == ("done", CONVERSATIONS, CONVERSATIONS, 0)
    (results,) = query(
        server, "SELECT count(*), count(DISTINCT session_id) FROM versions_replayresult"
    )
    assert results == (CONVERSATIONS, CONVERSATIONS)
    # No batch is left queued, and none says "running": the dead worker's is failed, saying so.
    assert query(
        server,
        "SELECT status, count(*) FROM django_tasks_database_dbtaskresult "
        "WHERE task_path LIKE '%replay_run_task' AND status <> 'SUCCESSFUL' GROUP BY status",
    ) == [("FAILED", 1)]
    assert query(
        server,
        "SELECT exception_class_path FROM django_tasks_database_dbtaskresult "
        "WHERE status = 'FAILED'",
    ) == [("gloveapp.versions.tasks.WorkerLost",)]
    # The recording's messages were never written to.
    assert query(server, "SELECT count(*) FROM versions_replayresult WHERE error <> ''") == [(0,)]


def test_a_publication_approved_as_a_worker_dies_is_published_once(server):
    victim = server.start_worker()
    approval = step(server, "ask_publish")

    step(server, "approve", approval["id"], approval["fingerprint"])
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    server.start_worker()

    published = until(
        lambda: query(server, "SELECT state FROM versions_publishrequest") == [("published",)],
        timeout=60,
    )
    assert published, f"{query(server, 'SELECT state FROM versions_publishrequest')}"
    assert query(
        server,
        "SELECT p.kind, v.number FROM versions_versionpublication p "
        "JOIN versions_agentversion v ON v.id = p.version_id ORDER BY p.id",
    ) == [("published", 1), ("published", 2)]
    assert query(
        server,
        "SELECT v.number FROM versions_agentpointer a "
        "JOIN versions_agentversion v ON v.id = a.published_id",
    ) == [(2,)]
