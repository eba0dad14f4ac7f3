"""A real glove-django server in another process, for the remote-store tests and the bench.

It runs Daphne (the ASGI server `make run` uses) on a free port against its own database: a
SQLite file in a temporary folder, or, when the caller runs on PostgreSQL, a fresh database
on the same server that is dropped afterwards. Nothing is shared with the test process but
HTTP, which is the point.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
DAPHNE = str(Path(sys.executable).with_name("daphne"))
UVICORN = str(Path(sys.executable).with_name("uvicorn"))
GRANIAN = str(Path(sys.executable).with_name("granian"))


class LiveServer:
    """`with LiveServer() as server: server.url, server.token_for("ann")`."""

    # The servers up now: a failing test's report carries the end of their logs
    # (tests/conftest.py), since what went wrong is often only in a server's or worker's log.
    running: set[LiveServer] = set()

    def __init__(
        self,
        *,
        database_url: str | None = None,
        extra_env: dict | None = None,
        sharing: LiveServer | None = None,
        server: str = "daphne",
    ) -> None:
        """`sharing`: a second server process on the first one's database and secret key
        (it neither creates, migrates nor drops that database). `server`: daphne (as `make
        run`), uvicorn (the websocket server of `make serve-prod`), granian (ASGI) or
        granian-wsgi (the HTTP server of `make serve-prod`: gloveapp.wsgi, no websockets)."""
        if server not in ("daphne", "uvicorn", "granian", "granian-wsgi"):
            raise ValueError("server must be daphne, uvicorn, granian or granian-wsgi")
        self.server = server
        self._shared = sharing is not None
        if sharing is not None:
            database_url = sharing.database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._folder = Path(tempfile.mkdtemp(prefix="glove-live-"))
        self._pg_admin_url: str | None = None
        self._pg_name: str | None = None
        if database_url and database_url.startswith(("postgres://", "postgresql://")):
            base, _, _ = database_url.rpartition("/")
            self._pg_name = f"glove_live_{secrets.token_hex(4)}"
            self._pg_admin_url = f"{base}/postgres"
            database_url = f"{base}/{self._pg_name}"
        else:
            database_url = f"sqlite:///{self._folder / 'live.sqlite3'}"
        self.database_url = database_url
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
            "DATABASE_URL": database_url,
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_hex(32),
            "GLOVE_MODEL": "",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        if sharing is not None:
            self._pg_name = self._pg_admin_url = None
            self.env["DATABASE_URL"] = self.database_url = sharing.database_url
            self.env["SECRET_KEY"] = sharing.env["SECRET_KEY"]
        self._process: subprocess.Popen | None = None
        self._log = None
        self.workers: list[subprocess.Popen] = []

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> LiveServer:
        if not self._shared:
            self._create_migrated_database()
        self._log = open(self._folder / "server.log", "wb")
        self._process = subprocess.Popen(
            self._command(),
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        LiveServer.running.add(self)
        self._wait_until_up()
        return self

    def start_worker(self, *, extra_env: dict | None = None) -> subprocess.Popen:
        """A `turn_worker` on the server's database (as `make run` starts one beside it)."""
        log = open(self._folder / f"worker{len(self.workers)}.log", "wb")
        worker = subprocess.Popen(
            [PYTHON, "manage.py", "turn_worker"],
            cwd=ROOT,
            env={**self.env, **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.workers.append(worker)
        return worker

    def start_process(self, *args: str) -> subprocess.Popen:
        """Another `manage.py` process beside the server (`run_agent roastery ...`, as `make
        run` starts the demo's mesh peer), stopped with the workers."""
        log = open(self._folder / f"worker{len(self.workers)}.log", "wb")
        process = subprocess.Popen(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.workers.append(process)
        return process

    def _command(self) -> list[str]:
        if self.server == "uvicorn":  # the websocket server of `make serve-prod`
            return [
                UVICORN,
                "gloveapp.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--ws",
                "websockets-sansio",
                "--lifespan",
                "off",
                "--no-access-log",
                "--backlog",
                "2048",
            ]
        if self.server == "granian-wsgi":  # the HTTP server of `make serve-prod`
            return [
                GRANIAN,
                "--interface",
                "wsgi",
                "gloveapp.wsgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--no-ws",
                "--log-level",
                "warning",
            ]
        if self.server == "granian":
            return [
                GRANIAN,
                "--interface",
                "asginl",
                "gloveapp.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--backlog",
                "2048",
                "--log-level",
                "warning",
            ]
        return [DAPHNE, "-b", "127.0.0.1", "-p", str(self.port), "gloveapp.asgi:application"]

    def stop(self) -> None:
        LiveServer.running.discard(self)
        for worker in self.workers:
            if worker.poll() is None:
                worker.terminate()
                try:
                    worker.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()
        self.workers.clear()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._pg_name:
            self._pg_execute(f'DROP DATABASE IF EXISTS "{self._pg_name}" WITH (FORCE)')
            self._pg_name = None
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log_tail(self, size: int = 4000) -> str:
        path = self._folder / "server.log"
        return path.read_text(errors="replace")[-size:] if path.exists() else ""

    def exited_workers(self, size: int = 3000) -> str:
        """Each worker that exited: its exit code and the end of its log ("" if none did)."""
        told = []
        for index, worker in enumerate(self.workers):
            if worker.poll() is not None:
                path = self._folder / f"worker{index}.log"
                tail = path.read_text(errors="replace")[-size:] if path.exists() else ""
                told.append(f"worker {index} exited {worker.returncode}:\n{tail}")
        return "\n".join(told)

    def worker_logs(self, size: int = 2000) -> str:
        """The end of every worker's log, alive or not: for a failure's message."""
        told = []
        for index, worker in enumerate(self.workers):
            path = self._folder / f"worker{index}.log"
            tail = path.read_text(errors="replace")[-size:] if path.exists() else ""
            state = "alive" if worker.poll() is None else f"exited {worker.returncode}"
            told.append(f"worker {index} ({state}):\n{tail}")
        return "\n".join(told)

    # -- helpers --------------------------------------------------------------------------
    def manage(self, *args: str, database_url: str | None = None) -> str:
        """Run a management command against the server's database (or `database_url`);
        return its stdout."""
        env = self.env if database_url is None else {**self.env, "DATABASE_URL": database_url}
        result = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout

    def token_for(self, username: str) -> str:
        """What `manage.py create_api_token USER --create-user` prints (`api_token`)."""
        return api_token(self.database_url, username)

    def add_user(self, username: str, password: str | None = None) -> None:
        """A user who logs in with `password` (`add_user`)."""
        add_user(self.database_url, username, password)

    def _wait_until_up(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"the server exited early:\n{self.log_tail()}")
            try:
                # Through Django and its whole URLconf, like any route; the schema, asked
                # for before, was generated at every start (a tenth of a second).
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server did not come up in {timeout}s:\n{self.log_tail()}")

    def _create_migrated_database(self) -> None:
        """The server's database, a copy of this process's migrated template: migrating
        from scratch was most of a server's start (about 8 s on a busy 2-core machine)."""
        if self._pg_name:
            template = _template(self._pg_admin_url, self._migrate_into)
            self._pg_execute(f'CREATE DATABASE "{self._pg_name}" TEMPLATE "{template}"')
        else:
            template = _template("sqlite", self._migrate_into)
            for suffix in ("", "-wal"):  # a write-ahead log left open is part of it
                if Path(template + suffix).exists():
                    shutil.copyfile(template + suffix, self._folder / f"live.sqlite3{suffix}")

    def _migrate_into(self, database_url: str) -> None:
        # The system checks load the whole URLconf (a second of CPU) and tell a template of
        # tables nothing; every server and command started on it runs them.
        self.manage("migrate", "--noinput", "--skip-checks", database_url=database_url)

    def _pg_execute(self, sql: str) -> None:
        _pg_execute(self._pg_admin_url, sql)


# Users and tokens written straight into a server's database, by the rules of the code that
# makes them (a `manage.py` command or shell is a Django start-up: 2 s of CPU each).


def api_token(database_url: str, username: str) -> str:
    """What `manage.py create_api_token USER --create-user` prints: the user's DRF token,
    the user (with an unusable password) and the token made first if missing
    (tests/api/test_create_api_token.py runs the command against a live server too)."""
    with _database(database_url) as execute:
        user_id = _user_id(execute, username, password=None)
        found = execute("SELECT key FROM authtoken_token WHERE user_id = %s", user_id)
        if found:
            return found[0][0]
        key = secrets.token_hex(20)  # DRF's Token.generate_key
        execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, CURRENT_TIMESTAMP, %s)",
            key,
            user_id,
        )
        return key


def add_user(database_url: str, username: str, password: str | None = None) -> None:
    """The user `username` as `User.objects.create_user(username, password=password)` makes
    it (None: an unusable password), unless it exists."""
    with _database(database_url) as execute:
        _user_id(execute, username, password=password)


def make_staff(database_url: str, username: str) -> None:
    with _database(database_url) as execute:
        execute("UPDATE auth_user SET is_staff = TRUE WHERE username = %s", username)


@contextmanager
def _database(database_url: str) -> Iterator[Callable[..., list[tuple]]]:
    """One transaction on a server's database (SQLite or PostgreSQL): `execute(sql, *args)`
    with `%s` placeholders, returning the rows."""
    if database_url.startswith("sqlite:///"):
        # As the server's own connections: wait for the lock, and take it at BEGIN.
        conn = sqlite3.connect(
            database_url.removeprefix("sqlite:///"), timeout=20, isolation_level=None
        )
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield lambda sql, *args: conn.execute(sql.replace("%s", "?"), args).fetchall()
            conn.execute("COMMIT")
        finally:
            conn.close()  # without a COMMIT, rolled back
        return
    import psycopg

    def execute(sql: str, *args: object) -> list[tuple]:
        cursor = conn.execute(sql, args)
        return cursor.fetchall() if cursor.description else []

    with psycopg.connect(database_url, connect_timeout=10) as conn:  # commits at the end
        yield execute


def _user_id(execute: Callable[..., list[tuple]], username: str, *, password: str | None) -> int:
    from django.contrib.auth.hashers import make_password

    username = unicodedata.normalize("NFKC", username)  # AbstractBaseUser.normalize_username
    found = execute("SELECT id FROM auth_user WHERE username = %s", username)
    if found:
        return found[0][0]
    return execute(
        "INSERT INTO auth_user (username, password, first_name, last_name, email, "
        "is_superuser, is_staff, is_active, date_joined) "
        "VALUES (%s, %s, '', '', '', FALSE, FALSE, TRUE, CURRENT_TIMESTAMP) RETURNING id",
        username,
        make_password(password),
    )[0][0]


def _pg_execute(admin_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql)


# Per test process: "sqlite" -> a migrated SQLite file; a PostgreSQL admin URL -> the name of
# a migrated database on that server, which CREATE DATABASE ... TEMPLATE copies. Removed when
# the process exits; a killed run leaves a glove_live_template_* database, dropped by the
# next run of the same process id or by hand.
_templates: dict[str, str] = {}


def _drop_quietly(admin_url: str, name: str) -> None:
    """At exit: the server may be gone already (a test's own PostgreSQL, tests/servers.py)."""
    try:
        _pg_execute(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:
        pass


def _template(kind: str, migrate_into) -> str:
    if kind in _templates:
        return _templates[kind]
    if kind == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="glove-live-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        path = folder / "template.sqlite3"
        migrate_into(f"sqlite:///{path}")
        _templates[kind] = str(path)
    else:
        name = f"glove_live_template_{os.getpid()}"
        _pg_execute(kind, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _pg_execute(kind, f'CREATE DATABASE "{name}"')
        atexit.register(_drop_quietly, kind, name)
        base, _, _ = kind.rpartition("/")
        migrate_into(f"{base}/{name}")
        _templates[kind] = name
    return _templates[kind]


def remote_store_factory(request) -> object:
    """The contract tests' `store_factory` for `RemoteStore` against the live server.

    Each store gets its own session, created over HTTP by the token's user (a 409 means a
    test asked for the same identifier twice, which is fine: one session, two stores).
    """
    import uuid

    from gloveapp.remote.remote_store import RemoteStore

    server: LiveServer = request.getfixturevalue("live_server_process")
    token: str = request.getfixturevalue("live_token")
    opened: list = request.getfixturevalue("remote_stores")

    def make(identifier: str | None = None) -> RemoteStore:
        session_id = identifier or f"remote_{uuid.uuid4().hex[:16]}"
        response = httpx.post(
            f"{server.url}/api/sessions",
            json={"sessionId": session_id},
            headers={"Authorization": f"Token {token}"},
            timeout=30,
        )
        if response.status_code not in (201, 409):
            raise RuntimeError(f"could not create session {session_id}: {response.text}")
        store = RemoteStore(server.url, token, session_id)
        opened.append(store)
        return store

    return make
