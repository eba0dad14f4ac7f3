"""`manage.py turn_worker` stops cleanly on SIGTERM, also when told twice.

`make serve-prod` stops its process group with SIGTERM and its shell's `kill 0` sends a
second one: that second stop used to fail ("cannot schedule new futures after shutdown"),
and a signal arriving while the event loop closed could leave the worker hanging.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest

from tests.api.liveserver import LiveServer

pytestmark = [pytest.mark.postgres]


@pytest.mark.process
def test_a_worker_told_to_stop_twice_exits_cleanly():
    with LiveServer(database_url=os.environ.get("DATABASE_URL")) as server:
        worker = server.start_worker()
        log = server._folder / "worker0.log"
        deadline = time.monotonic() + 60
        while b"ready" not in log.read_bytes():
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the worker never said it was ready"
            time.sleep(0.05)

        worker.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)

        assert worker.wait(timeout=30) == 0
        output = log.read_text()
        assert "Traceback" not in output, output
        assert "never retrieved" not in output, output


SEED_OLD_STEPS = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from gloveapp.conversations.services import session_create
from gloveapp.turns.models import Turn, TurnStep
owner = get_user_model().objects.create_user("pruner")
session = session_create(owner=owner, agent_name="coffee")
turn = Turn.objects.create(session=session, user=owner, text="old", status="done")
old = timezone.now() - timedelta(days=100)
TurnStep.objects.bulk_create(
    [TurnStep(turn=turn, attempt=1, kind="tool", name="menu", started_at=old)
     for _ in range({rows})],
    batch_size=5000,
)
"""


def steps_left(database_url: str) -> int:
    """The server's turn steps, read beside it (SQLite in the SQLite pass, else PostgreSQL)."""
    if database_url.startswith("sqlite:"):
        import sqlite3

        path = database_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, timeout=20)) as connection:
            return connection.execute("SELECT count(*) FROM turns_turnstep").fetchone()[0]
    import psycopg

    with psycopg.connect(database_url) as connection:
        return connection.execute("SELECT count(*) FROM turns_turnstep").fetchone()[0]


@pytest.mark.process
def test_a_worker_told_to_stop_mid_prune_stops_between_two_batches():
    rows = 20_000
    with LiveServer(database_url=os.environ.get("DATABASE_URL")) as server:
        server.manage("shell", "-c", SEED_OLD_STEPS.format(rows=rows))
        # One row a batch: the prune of the old steps takes minutes unless it stops.
        worker = server.start_worker(
            extra_env={"GLOVE_RETENTION_BATCH": "1", "GLOVE_RETAIN_TURN_STEPS_DAYS": "30"}
        )
        deadline = time.monotonic() + 120
        while steps_left(server.database_url) == rows:
            assert worker.poll() is None, server.worker_logs()
            assert time.monotonic() < deadline, "the prune never started"
            time.sleep(0.1)

        worker.send_signal(signal.SIGTERM)

        assert worker.wait(timeout=60) == 0, server.worker_logs()
        # It stopped mid-prune (between two batches), not after the last row.
        assert steps_left(server.database_url) > 0
