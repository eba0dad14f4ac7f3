"""`make serve-prod` (the documented production command) on free ports, and its process tree.

    with ServeProd(database_url=..., extra_env={"REDIS_URL": ...}) as stack:
        stack.url, stack.ws_url
        stack.http_workers()        # granian's worker pids
        stack.websocket_workers()   # uvicorn's worker pids
        stack.turn_workers()        # the turn workers' pids
        stack.wait()                # the launcher's exit status

Shared by tests/healing and bench/chaos.py. The processes are found through /proc (Linux),
by their parents, as an operator would with `pstree`. Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


# -- the process tree -------------------------------------------------------------------------
def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name may hold spaces and parentheses
    return int(fields[1]) if fields[0] != "Z" else None


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and parent_of(int(entry.name)) == pid:
            found.append(int(entry.name))
    return sorted(found)


def descendants_of(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children_of(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    return parent_of(pid) is not None


class ServeProd:
    """The production topology as `make serve-prod` starts it, on a database of the
    caller's (a SQLite file in a temporary folder by default), until `stop()`."""

    def __init__(
        self,
        *,
        database_url: str | None = None,
        http_workers: int = 2,
        ws_workers: int = 2,
        turn_workers: int = 1,
        extra_env: dict | None = None,
        port: int | None = None,
        ws_port: int | None = None,
    ) -> None:
        """`port` / `ws_port`: where to listen (free ports by default; a restarted stack
        takes its predecessor's, and its SECRET_KEY in `extra_env`, so clients carry on)."""
        self.folder = Path(tempfile.mkdtemp(prefix="glove-serve-prod-"))
        self.port, self.ws_port = port or free_port(), ws_port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"http://127.0.0.1:{self.ws_port}"
        self.database_url = database_url or f"sqlite:///{self.folder / 'db.sqlite3'}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GRANIAN_")},
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
            "DATABASE_URL": self.database_url,
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_hex(32),
            "GLOVE_MODEL": "",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        if "REDIS_URL" not in (extra_env or {}):
            self.env.pop("REDIS_URL", None)
        self.counts = (http_workers, ws_workers, turn_workers)
        self.log_path = self.folder / "serve-prod.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 300.0) -> ServeProd:
        """Runs `make serve-prod` and waits until every process is up and both servers
        answer. The default wait is long: under `make test`'s three passes on two cores, a
        stack's first start (migrate on a new database, then eight processes importing
        Django at once) took over 120 s."""
        http_workers, ws_workers, turn_workers = self.counts
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [
                "make",
                "-s",
                # The venv is there already: never a pip install inside a test.
                "-o",
                ".venv/.installed-run",
                "serve-prod",
                f"PORT={self.port}",
                f"WS_PORT={self.ws_port}",
                f"HTTP_WORKERS={http_workers}",
                f"WS_WORKERS={ws_workers}",
                f"TURN_WORKERS={turn_workers}",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"make serve-prod exited early:\n{self.log_tail()}")
            if all(self.readiness().values()):
                return self
            time.sleep(0.2)
        seen = ", ".join(
            f"{part}: {'yes' if ok else 'NO'}" for part, ok in self.readiness().items()
        )
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"make serve-prod did not come up in {timeout:.0f} s ({seen}):\n{tail}")

    def readiness(self) -> dict[str, bool]:
        """What `start` waits for, each part on its own (a timeout names the missing one)."""
        http_workers, ws_workers, turn_workers = self.counts
        return {
            "http answers": self.answers(self.url),
            "websockets answer": self.answers(self.ws_url),
            f"{http_workers} http workers": len(self.http_workers()) == http_workers,
            f"{ws_workers} websocket workers": len(self.websocket_workers()) == ws_workers,
            f"{turn_workers} turn workers": len(self.turn_workers()) == turn_workers,
        }

    def manage(self, *args: str, timeout: float = 300.0) -> str:
        """A `manage.py` command on the stack's database and settings; its stdout (a failure
        raises with the end of its stderr)."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None
        self._log.close()

    def __enter__(self) -> ServeProd:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def wait(self, timeout: float) -> int:
        """The exit status of `make serve-prod` (it raises TimeoutExpired if still up)."""
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def log_tail(self, size: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-size:]

    @staticmethod
    def answers(url: str) -> bool:
        """GET /healthz answered 200 (a refused or dropped connection: False)."""
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    # -- its processes ------------------------------------------------------------------------
    def launcher(self) -> int | None:
        if self.process is None:
            return None
        for pid in [self.process.pid, *descendants_of(self.process.pid)]:
            words = command_of(pid).split()
            if len(words) > 1 and words[1].endswith("serve_prod.py"):
                return pid
        return None

    def every_pid(self) -> list[int]:
        """make, the launcher and everything under them."""
        if self.process is None:
            return []
        return [self.process.pid, *descendants_of(self.process.pid)]

    def _master(self, word: str) -> int | None:
        launcher = self.launcher()
        if launcher is None:
            return None
        for pid in children_of(launcher):
            if word in command_of(pid).split(" ", 1)[0] or f"bin/{word}" in command_of(pid):
                return pid
        return None

    def http_master(self) -> int | None:
        return self._master("granian")

    def websocket_master(self) -> int | None:
        return self._master("uvicorn")

    def http_workers(self) -> list[int]:
        master = self.http_master()
        return children_of(master) if master else []

    def websocket_workers(self) -> list[int]:
        master = self.websocket_master()
        if master is None:
            return []
        # uvicorn's workers are multiprocessing's spawned children (beside its resource
        # tracker).
        return [
            pid
            for pid in children_of(master)
            if "multiprocessing.spawn" in command_of(pid)
            and "resource_tracker" not in command_of(pid)
        ]

    def turn_workers(self) -> list[int]:
        launcher = self.launcher()
        if launcher is None:
            return []
        return [pid for pid in children_of(launcher) if "turn_worker" in command_of(pid)]
