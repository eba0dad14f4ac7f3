"""Two users, each owning a workspace folder, and the project's ASGI application to reach
them through: in this process (httpx's ASGI transport), or behind a real server for the tests
of the servers themselves (`tests.api.liveserver.LiveServer`, the browser tests)."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import re
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
import pytest_asyncio


class Server(Protocol):
    url: str

    def manage(self, *args: str) -> str: ...


@dataclass
class LiveWorkspace:
    id: str
    token: str
    root: Path
    mcp_url: str
    owner_token: str  # the owner's REST API token
    # How requests reach the server: None over the network (a real server's URL), or the
    # in-process application's transport.
    transport: httpx.AsyncBaseTransport | None = None


def parse_created(output: str) -> tuple[str, str]:
    workspace_id = re.search(r"^id:\s+(\S+)", output, re.M).group(1)
    token = re.search(r"^token:\s+(\S+)", output, re.M).group(1)
    return workspace_id, token


def make_workspace(server: Server, root: Path, owner: str, owner_token: str) -> LiveWorkspace:
    output = server.manage(
        "create_workspace", "--label", f"{owner}'s research", "--root", str(root), "--owner", owner
    )
    workspace_id, token = parse_created(output)
    return LiveWorkspace(
        id=workspace_id,
        token=token,
        root=root,
        mcp_url=f"{server.url}/mcp/{workspace_id}",
        owner_token=owner_token,
        transport=getattr(server, "transport", None),
    )


def fill_folder(root: Path, outside: Path) -> None:
    (root / "research").mkdir(parents=True)
    (root / "research" / "report.md").write_text("# Report\n\nAll **done**.\n")
    (root / "notes.txt").write_text("plain notes\n")
    (outside / "secret.txt").write_text("top secret\n")
    os.symlink(outside / "secret.txt", root / "escape.txt")
    os.symlink(root / "notes.txt", root / "inside-link.txt")
    # A Latin-1 file name: the OS opens it, but it is no UTF-8 text (arrives as "a\udc80.md").
    with open(os.path.join(os.fsencode(root), b"a\x80.md"), "wb") as latin1_named:
        latin1_named.write(b"# not UTF-8 named\n")


class InProcessServer:
    """The project's ASGI application (`gloveapp.asgi`, as Daphne serves it) in this process,
    on the test database: requests go through httpx's ASGI transport, commands through
    `call_command`. The application's database work runs on asgiref's thread, so what the
    tests write must be committed (`live` is a transactional test's)."""

    url = "http://testserver"

    def __init__(self) -> None:
        from gloveapp.asgi import application

        self.transport = httpx.ASGITransport(app=application)
        self._log = _Recorded()

    def client(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.transport, base_url=self.url, **options)

    def manage(self, *args: str) -> str:
        """A management command's stdout. It runs on a thread of its own, as a command runs
        outside the event loop (Django refuses database work inside one)."""
        from django.core.management import call_command
        from django.db import connections

        def run() -> str:
            out = io.StringIO()
            try:
                call_command(*args, stdout=out)
            finally:
                connections.close_all()
            return out.getvalue()

        with ThreadPoolExecutor(1) as thread:
            return thread.submit(run).result()

    def token_for(self, username: str) -> str:
        return self.manage("create_api_token", username, "--create-user").strip()

    def log_tail(self, size: int = 4000) -> str:
        """What the application logged during the test (records and tracebacks)."""
        return "\n".join(self._log.lines)[-size:]

    def close_connections(self) -> None:
        """The application's thread keeps its database connection: closed, so that the
        test's flush and the end of the run find none left open."""
        from asgiref.sync import SyncToAsync
        from django.db import connections

        SyncToAsync.single_thread_executor.submit(connections.close_all).result()

    def __enter__(self) -> InProcessServer:
        logging.getLogger().addHandler(self._log)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger().removeHandler(self._log)


class _Recorded(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lifespan() -> AsyncIterator[None]:
    """The application's ASGI lifespan on the module's event loop, as uvicorn sends it: the
    MCP session manager starts with it and stops cleanly at the end (on the first request,
    as under Daphne, it would be left to die with the loop)."""
    from gloveapp.asgi import application

    inbox: asyncio.Queue = asyncio.Queue()
    sent: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(application({"type": "lifespan"}, inbox.get, sent.put))
    await inbox.put({"type": "lifespan.startup"})
    assert (await sent.get())["type"] == "lifespan.startup.complete"
    yield
    await inbox.put({"type": "lifespan.shutdown"})
    assert (await sent.get())["type"] == "lifespan.shutdown.complete"
    await task


@pytest.fixture
def live(tmp_path, transactional_db, lifespan) -> Iterator[dict]:
    """ann's and bob's workspaces, on rows the application's threads see (committed, and
    flushed after the test as any transactional test's)."""
    base = tmp_path / "workspaces"
    with InProcessServer() as server:
        ann_token = server.token_for("ann")
        bob_token = server.token_for("bob")
        ann_root, bob_root, outside = base / "ann", base / "bob", base / "outside"
        for folder in (ann_root, bob_root, outside):
            folder.mkdir(parents=True)
        fill_folder(ann_root, outside)
        (bob_root / "bob.md").write_text("bob's\n")
        yield {
            "server": server,
            "ann": make_workspace(server, ann_root, "ann", ann_token),
            "bob": make_workspace(server, bob_root, "bob", bob_token),
            "outside": outside,
        }
        server.close_connections()
