"""`manage.py turn_worker` stops cleanly on SIGTERM, also when told twice.

`make serve-prod` stops its process group with SIGTERM and its shell's `kill 0` sends a
second one: that second stop used to fail ("cannot schedule new futures after shutdown"),
and a signal arriving while the event loop closed could leave the worker hanging.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.api.liveserver import LiveServer

pytestmark = [pytest.mark.postgres]


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
