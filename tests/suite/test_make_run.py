"""`make run` when its port is taken: it says so, and how to pick another, before doing work."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def taken_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.process
def test_it_refuses_to_start_on_a_taken_port_and_names_the_way_out(taken_port, tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite3'}"}

    done = subprocess.run(
        ["make", "--no-print-directory", "run", f"PORT={taken_port}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"127.0.0.1:{taken_port} is already in use" in output
    assert f"make run PORT={taken_port + 1}" in output
    # Nothing was set up for a server that cannot start.
    assert "demo is ready" not in output
    assert not (tmp_path / "run.sqlite3").exists()
