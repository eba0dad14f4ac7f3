"""A redis-server of a test's own, on a free port, that the test may kill, restart and freeze.

Shared by the fault tests (`pytest -m faults`) and `bench/chaos.py`:

    with RedisServer() as redis_server:
        url = redis_server.url(db=0)
        redis_server.kill()        # SIGKILL: connections drop, nothing answers
        redis_server.start()       # the same port again, empty (no persistence)
        redis_server.freeze()      # SIGSTOP: connections stay open, nothing answers
        redis_server.thaw()        # SIGCONT

or the `own_redis` pytest fixture below. Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One redis-server process on one port; `start()` after `kill()` reuses the port."""

    def __init__(self, *, port: int | None = None, binary: str | None = None) -> None:
        self.binary = binary or shutil.which("redis-server") or "redis-server"
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="glove-redis-"))
        self.process: subprocess.Popen | None = None
        self.frozen = False

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> RedisServer:
        if self.running():
            return self
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.frozen = False
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited at start (port {self.port} taken?)")
            if self._answers():
                return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: every connection is reset, the data is gone."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait(timeout=10)
        self.process = None
        self.frozen = False

    def restart(self) -> None:
        self.kill()
        self.start()

    def freeze(self) -> None:
        """SIGSTOP: connections stay open (new ones even connect) but nothing answers."""
        if self.running():
            os.kill(self.process.pid, signal.SIGSTOP)
            self.frozen = True

    def thaw(self) -> None:
        if self.running():
            os.kill(self.process.pid, signal.SIGCONT)
            self.frozen = False

    def stop(self) -> None:
        self.thaw()
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A private redis-server for one test (a missing binary fails under CI, else skips)."""
    if shutil.which("redis-server") is None:
        from tests.conftest import service_missing

        service_missing("redis-server is not installed")
    with RedisServer() as server:
        yield server
