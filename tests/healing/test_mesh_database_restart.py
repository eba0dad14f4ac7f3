"""A `run_agent` peer on the database mesh transport keeps receiving after a PostgreSQL
restart, without a restart of its own.

Agent b is kept on the mesh by `manage.py run_agent b` and its wake-up turns run on a
`turn_worker` (tests/mesh/peer_agent.py: acknowledge, then reply to the sender). Agent a
sends from a short-lived process. After one exchange the database is restarted; the next
message must wake b again (its delivery reader and its wake-up queueing replace their broken
connections), be answered once, and both long-running processes stay the same. Through
PgBouncer in transaction mode, as production runs (tests/healing/conftest.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.api.liveserver import ROOT, LiveServer
from tests.healing.stack import query
from tests.servers import through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

WAIT = 60.0
SEND = """
import asyncio
from gloveapp.conversations.services import DuplicateSession, session_create
from mesh.core.types import AgentIdentity, MeshMessage
from mesh.transports.database import DatabaseMeshTransport

try:
    session_create(session_id="mesh:a", agent_name="coffee", title="a")
except DuplicateSession:
    pass

async def main():
    adapter = DatabaseMeshTransport().adapter("a")
    await adapter.register(AgentIdentity(id="a", name="Agent A", description="first"))
    await adapter.send(MeshMessage(id="msg_a_{n}", from_="a", to="b", content="hello B {n}"))

asyncio.run(main())
"""


@pytest.fixture
def mesh_peer(postgres, pgbouncer) -> Iterator[tuple[LiveServer, subprocess.Popen]]:
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.mesh.peer_settings",
        "MESH_TRANSPORT": "database",
        "GLOVE_TASKS_BACKEND": "db",
        "GLOVE_TURN_LEASE_SECONDS": "4",
        "REDIS_URL": "",
    }
    # Its database and a worker; no HTTP server is needed here.
    server = through_pgbouncer(LiveServer(database_url=postgres.url(), extra_env=env), pgbouncer)
    server._create_migrated_database()
    try:
        server.start_worker()
        log = open(server._folder / "peer.log", "wb")
        peer = subprocess.Popen(
            [sys.executable, "manage.py", "run_agent", "b", "--mesh-id", "b"],
            cwd=ROOT,
            env=server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _until(lambda: b"on the mesh, waiting" in (server._folder / "peer.log").read_bytes())
            yield server, peer
        finally:
            peer.terminate()
            peer.wait(timeout=15)
            log.close()
    finally:
        server.stop()


def test_a_mesh_peer_on_the_database_transport_hears_again_after_a_restart(mesh_peer, postgres):
    server, peer = mesh_peer
    worker = server.workers[0]
    _send(server, 1)
    _until(lambda: _replies(server) == 1)

    postgres.restart()
    back_at = time.monotonic()
    _send(server, 2)
    _until(lambda: _replies(server) == 2, f"{server._folder / 'peer.log'}")
    healed = time.monotonic() - back_at
    print(f"\n[mesh, database transport] answered {healed:.2f} s after the database was back")

    turns = query(server.database_url, "SELECT status FROM turns_turn WHERE session_id = 'mesh:b'")
    assert turns == [("done",), ("done",)]
    assert peer.poll() is None and worker.poll() is None  # neither was restarted
    log = (server._folder / "peer.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]


def _send(server: LiveServer, n: int) -> None:
    server.manage("shell", "-c", SEND.replace("{n}", str(n)))


def _replies(server: LiveServer) -> int:
    try:
        rows = query(
            server.database_url,
            "SELECT count(*) FROM inbox_inboxitem WHERE session_id = 'mesh:a' "
            "AND tag = 'mesh:from:b'",
        )
    except Exception:
        return -1  # the database is still coming back
    return rows[0][0]


def _until(condition, log: str = "") -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            from pathlib import Path

            text = Path(log).read_text(errors="replace")[-4000:] if log else ""
            raise AssertionError(f"never true within {WAIT} s\n{text}")
        time.sleep(0.1)
