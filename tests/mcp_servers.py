"""Real MCP servers that nobody here wrote, started by the tests.

- `mcp-server-time` (PyPI, in the dev extra): stdio, run from this virtualenv.
- `@modelcontextprotocol/server-everything` (npm, pinned): streamable HTTP, installed on first
  use into the git-ignored `.mcp-servers/` folder by `npm install`, then started on a free port.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
INSTALL_DIR = ROOT / ".mcp-servers"
EVERYTHING_ENTRY = (
    INSTALL_DIR
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


def time_server(name: str = "time", **options: object) -> dict:
    """The `mcp_servers` entry of mcp-server-time (stdio)."""
    return {"name": name, "command": TIME_SERVER, "args": ["--local-timezone", "UTC"], **options}


def install_everything() -> Path:
    """The installed server's entry point (npm install once, under a lock: the test passes
    of `make test` run side by side)."""
    INSTALL_DIR.mkdir(exist_ok=True)
    with open(INSTALL_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        installed = INSTALL_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"
        version_file = installed / "package.json"
        if not (
            EVERYTHING_ENTRY.exists() and f'"{EVERYTHING_VERSION}"' in version_file.read_text()
        ):
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("npm is not installed")
            subprocess.run(
                [
                    npm, "install", "--prefix", str(INSTALL_DIR), "--no-audit", "--no-fund",
                    "--no-save", f"{EVERYTHING_PACKAGE}@{EVERYTHING_VERSION}",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=600,
            )  # fmt: skip
    return EVERYTHING_ENTRY


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EverythingServer:
    """server-everything over streamable HTTP in a process of its own."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._log = tempfile.NamedTemporaryFile(prefix="mcp-everything-", suffix=".log")
        self.process: subprocess.Popen | None = None

    def start(self) -> EverythingServer:
        entry = install_everything()
        self.process = subprocess.Popen(
            [shutil.which("node") or "node", str(entry), "streamableHttp"],
            env={**os.environ, "PORT": str(self.port)},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"server-everything did not start:\n{self.log()}")

    def entry(self, name: str = "everything", **options: object) -> dict:
        return {"name": name, "url": self.url, **options}

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def sessions_started(self) -> int:
        return self.log().count("Session initialized with ID")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
        self._log.close()


@contextlib.contextmanager
def everything_server() -> Iterator[EverythingServer]:
    server = EverythingServer().start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def big_result_server() -> Iterator[dict]:
    """tests/fakes/big_result_mcp.py (the official SDK's FastMCP) over streamable HTTP on a
    free port: tools that answer with megabytes. Yields its `mcp_servers` entry. (Over stdio
    the SDK's client takes about 40 s to read 20 MB; over HTTP a few seconds.)"""
    port = free_port()
    script = ROOT / "tests" / "fakes" / "big_result_mcp.py"
    log = tempfile.NamedTemporaryFile(prefix="mcp-big-", suffix=".log")
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the big-result MCP server did not start:\n{log.name}")
            time.sleep(0.05)
        yield {"name": "big", "url": f"http://127.0.0.1:{port}/mcp", "timeout": 120}
    finally:
        process.kill()
        process.wait(timeout=10)
        log.close()
