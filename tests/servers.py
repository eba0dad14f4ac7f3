"""Database and Redis servers of a test's (or a chaos run's) own, to restart and kill at will.

    with PostgresServer() as pg:            # initdb + start on a free port (trust auth)
        url = pg.url("glove")               # postgres://postgres@127.0.0.1:<port>/glove
        pg.restart()                        # `pg_ctl restart -m fast`: every connection dies
        pg.stop(); pg.start()               # a longer outage
    with RedisServer() as redis: redis.url, redis.kill(), redis.start(), redis.freeze()

The PostgreSQL binaries are found with `pg_config --bindir` (or PG_BINDIR). PostgreSQL
refuses to run as root: as root, the cluster is made and run as the `postgres` OS user
(PG_OS_USER). `initdb` runs once per process: later servers copy that fresh cluster. Used
by tests/healing and bench/chaos.py; nothing here imports Django.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_OS_USER = os.environ.get("PG_OS_USER", "postgres")
STARTUP_TIMEOUT = 60.0


def free_port() -> int:
    """A port nothing listens on, for a server a test starts, below the kernel's ephemeral
    range: a port the kernel hands out (a bind to port 0) is also any outgoing connection's
    next source port, and one was taken that way before `make serve-prod` bound it
    ("Address already in use")."""
    low = _ephemeral_low()
    for _ in range(500):
        port = random.randrange(max(1024, low - 12_000), low)
        with socket.socket() as sock:
            try:
                sock.bind(("", port))  # every address: a server on 127.0.0.1 is seen too
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port below {low}")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def run_postgres_admin_url() -> str:
    """The `postgres` database of the test run's PostgreSQL server: the server PG_TEST_URL
    names (`make test` sets it), 127.0.0.1:5432 otherwise."""
    url = os.environ.get("PG_TEST_URL", "postgres://postgres@127.0.0.1:5432/glove_test")
    return f"{url.rpartition('/')[0]}/postgres"


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def pg_bindir() -> Path | None:
    """Where initdb and pg_ctl are, or None when PostgreSQL's server is not installed."""
    configured = os.environ.get("PG_BINDIR")
    if configured:
        return Path(configured)
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        folder = Path(found.stdout.strip())
        if found.returncode == 0 and (folder / "initdb").exists():
            return folder
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _os_user() -> str | None:
    """Whom the cluster runs as: the `postgres` user when we are root, else ourselves."""
    return PG_OS_USER if os.geteuid() == 0 else None


def _give_to(path: Path, user: str | None) -> None:
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for folder, _, files in os.walk(path):
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        for name in files:
            os.chown(os.path.join(folder, name), entry.pw_uid, entry.pw_gid)


_fresh_cluster: Path | None = None


def _initdb(bindir: Path, user: str | None) -> Path:
    """A fresh cluster made once per process (initdb is seconds on a busy machine); each
    server copies it."""
    global _fresh_cluster
    if _fresh_cluster is None:
        parent = Path(tempfile.mkdtemp(prefix="glove-pg-fresh-"))
        atexit.register(shutil.rmtree, parent, ignore_errors=True)
        data = parent / "data"
        _give_to(parent, user)
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            user=user,
        )
        _fresh_cluster = data
    return _fresh_cluster


class PostgresServer:
    """A PostgreSQL cluster of its own on a free port, in a temporary folder."""

    def __init__(self, *, port: int | None = None, max_connections: int = 200) -> None:
        bindir = pg_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
        self.bindir = bindir
        self.user = _os_user()
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="glove-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.max_connections = max_connections
        self._made = False

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> PostgresServer:
        if not self._made:
            shutil.copytree(_initdb(self.bindir, self.user), self.data, symlinks=True)
            self.data.chmod(0o700)
            _give_to(self.folder, self.user)
            self._made = True
            atexit.register(self.destroy)  # a test that fails before its teardown
        self._pg_ctl("start", "-w", "-t", str(int(STARTUP_TIMEOUT)), "-o", self._options())
        self._wait_accepting()
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast`: roll back and disconnect every client; `immediate`: as
        a crash)."""
        self._pg_ctl("stop", "-w", "-m", mode, check=False)

    def restart(self, mode: str = "fast") -> float:
        """`pg_ctl restart -m fast`: every client loses its connection; returns when the
        server accepts connections again, with how long it was away (seconds)."""
        started = time.monotonic()
        self._pg_ctl("restart", "-w", "-m", mode, "-o", self._options())
        self._wait_accepting()
        return time.monotonic() - started

    def kill(self) -> None:
        """SIGKILL the postmaster (a crashed server; its children follow)."""
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)

    def freeze(self) -> None:
        """SIGSTOP the postmaster and every backend: connections stay open (new ones even
        connect, then wait for the handshake) but nothing answers or cancels."""
        for pid in self._processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self._processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def _processes(self) -> list[int]:
        """The postmaster and its children (backends, background workers)."""
        postmaster = self.pid()
        if postmaster is None:
            return []
        found = [postmaster]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")".
            fields = stat.rsplit(")", 1)[-1].split()
            if len(fields) > 1 and fields[1] == str(postmaster):
                found.append(int(entry.name))
        return found

    def pid(self) -> int | None:
        pidfile = self.data / "postmaster.pid"
        try:
            return int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def destroy(self) -> None:
        if self._made and (self.data / "postmaster.pid").exists():
            self._pg_ctl("stop", "-w", "-m", "immediate", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
        self._made = False

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.destroy()

    # -- helpers ------------------------------------------------------------------------------
    def execute(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)

    def log_tail(self, size: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""

    def _options(self) -> str:
        # No fsync: a test's cluster is thrown away, and fsyncs slow a shared machine; what
        # the server wrote survives a crash of its processes all the same (the machine's
        # page cache holds it). Commits still wait for their WAL to be written
        # (`synchronous_commit` stays on): a test that crashes the server (`restart
        # ("immediate")`) must lose only what the product itself commits early, as in
        # production. With it off, a turn answered 202 vanished in such a crash.
        return (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories='{self.folder}' "
            f"-c max_connections={self.max_connections} "
            "-c fsync=off -c full_page_writes=off"
        )

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        result = subprocess.run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), *args],
            capture_output=True,
            text=True,
            user=self.user,
            timeout=STARTUP_TIMEOUT + 30,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"pg_ctl {args[0]} failed: {result.stderr}{result.stdout}\n{self.log_tail()}"
            )

    def _wait_accepting(self) -> None:
        import psycopg

        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


class RedisServer:
    """A redis-server of its own on a free port (no persistence). `start()` after `kill()`
    comes back on the same port, empty, as a restarted Redis without persistence does."""

    def __init__(self, *, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.binary = binary
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="glove-redis-"))
        self.process: subprocess.Popen | None = None
        self.frozen = False

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

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
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def kill(self) -> None:
        """SIGKILL: every connection is reset, the data is gone."""
        if self.running():
            self.process.kill()
            self.process.wait()
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
        if self.running():
            self.thaw()
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class ReplicaServer(PostgresServer):
    """A streaming replica of `primary` on a free port: `pg_basebackup -R` from the running
    primary, then started as a hot standby. `pause()` holds its replay (a replica as far
    behind as a test needs), `resume()` lets it catch up."""

    def __init__(self, primary: PostgresServer, *, port: int | None = None) -> None:
        super().__init__(port=port, max_connections=primary.max_connections)
        self.primary = primary

    def start(self) -> ReplicaServer:
        if not self._made:
            _give_to(self.folder, self.user)
            subprocess.run(
                [
                    str(self.bindir / "pg_basebackup"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.primary.port),
                    "-U",
                    "postgres",
                    "-D",
                    str(self.data),
                    "-R",
                    "--checkpoint=fast",
                    "--wal-method=stream",
                ],
                check=True,
                capture_output=True,
                user=self.user,
                timeout=STARTUP_TIMEOUT + 60,
            )
            self.data.chmod(0o700)
            self._made = True
            atexit.register(self.destroy)
        self._pg_ctl("start", "-w", "-t", str(int(STARTUP_TIMEOUT)), "-o", self._options())
        self._wait_accepting()
        return self

    def pause(self) -> None:
        self.execute("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        self.execute("SELECT pg_wal_replay_resume()")

    def caught_up(self) -> bool:
        """Everything the primary has written is replayed here."""
        import psycopg

        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            written = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            behind = conn.execute(
                "SELECT pg_wal_lsn_diff(%s, pg_last_wal_replay_lsn())", [written]
            ).fetchone()[0]
        return behind <= 0


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")


class PgBouncer:
    """PgBouncer (Debian's package) in transaction mode on a free port, in front of a
    PostgreSQL server: every database of `server` under the same name."""

    def __init__(self, server: PostgresServer, *, port: int | None = None) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.binary = binary
        self.server = server
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="glove-pgbouncer-"))
        self.process: subprocess.Popen | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> PgBouncer:
        (self.folder / "users.txt").write_text('"postgres" ""\n')
        (self.folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={self.server.port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            f"unix_socket_dir = {self.folder}\n"
            "auth_type = trust\n"
            f"auth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\n"
            "max_client_conn = 500\n"
            "default_pool_size = 20\n"
            # What some clients send at connect that PgBouncer would refuse.
            "ignore_startup_parameters = extra_float_digits\n"
            "server_reset_query = \n"
            "server_check_delay = 1\n"
            # After the server went away, try again within a second (default 15 s).
            "server_login_retry = 0\n"
            # A client waits for a server connection at most this long, then is told so
            # (`query_wait_timeout`: a 503 for a request): while PostgreSQL is down,
            # as GLOVE_DB_CONNECT_TIMEOUT_SECONDS (10 s) bounds the wait for a direct one,
            # instead of PgBouncer's 120 s (docs/howto/deploy.md).
            "query_wait_timeout = 10\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
        )
        user = _os_user()
        if user is not None:
            _give_to(self.folder, user)
        self.process = subprocess.Popen(
            [self.binary, str(self.folder / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=user,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pgbouncer did not start:\n{self.log_tail()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def log_tail(self, size: int = 4000) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace")[-size:] if path.exists() else ""

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def through_pgbouncer[S](server: S, bouncer: PgBouncer) -> S:
    """`server` (a tests/api/liveserver.py LiveServer or a tests/healing/serve_prod.py
    ServeProd, not started yet) and everything it starts (workers, `manage.py`) reach its
    database through `bouncer`, the LISTEN connections directly (`DATABASE_DIRECT_URL`, the
    production topology); `server.database_url` still names the database itself (the
    tests' own queries, its creation and removal)."""
    server.env["DATABASE_DIRECT_URL"] = server.database_url
    server.env["DATABASE_URL"] = bouncer.url(server.database_url.rpartition("/")[2])
    return server
