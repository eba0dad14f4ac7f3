"""Shared fixtures. Services are real: PostgreSQL and Redis on this machine.

Under CI=true a test that needs a missing service fails instead of skipping.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
from django.db import connection

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def xdist_worker() -> tuple[int, int]:
    """(this process's index, how many there are) under pytest-xdist (`-n`), else (0, 1)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not name.startswith("gw"):
        return 0, 1
    return int(name[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def redis_url_of_worker(url: str, index: int) -> str:
    """The Redis database `index` above `url`'s: each xdist worker flushes one of its own."""
    if index == 0:
        return url
    where = urlsplit(url)
    base = int(where.path.strip("/") or 0)
    return where._replace(path=f"/{base + index}").geturl()


# TEST_REDIS_URL's database for a run in one process; under `-n N` worker k takes the k-th
# database above it (`.ci/test-passes` starts a redis-server with enough databases). Unset:
# the local Redis's last databases (15 alone, 12 to 15 for four workers).
REDIS_URL = redis_url_of_worker(
    os.environ.get("TEST_REDIS_URL", f"redis://127.0.0.1:6379/{16 - xdist_worker()[1]}"),
    xdist_worker()[0],
)


# One password hasher for the whole suite, in this process and the servers it starts (they
# inherit the environment): PBKDF2 costs ~0.3 s per login and per user created.
os.environ.setdefault("GLOVE_PASSWORD_HASHERS", "django.contrib.auth.hashers.MD5PasswordHasher")


def pytest_configure(config) -> None:
    from django.conf import settings

    # The test process counts its rate limits in its own memory (each test starts clean, with
    # no table to empty); the servers that tests start use the shared cache production uses
    # (Redis or the database's `glove_cache`: tests/serving/test_shared_throttles.py).
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # Django's settings were read before this module (pytest-django sets Django up first).
    settings.PASSWORD_HASHERS = os.environ["GLOVE_PASSWORD_HASHERS"].split(",")
    _lighter_flush()


# Rows every migrated database holds, the same in each: what `post_migrate` writes.
KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


def _lighter_flush() -> None:
    """A transactional test ends with Django emptying every table (its `flush`). Three
    things make that cheaper here; a flush that resets sequences or cascades (a test's own
    `flush`) stays Django's.

    - It keeps the content types and permissions: emptied, the `post_migrate` signal that
      follows the flush wrote them all again (some 100 and 400 rows: 56-66 ms a flush on
      PostgreSQL, 32 kept; 23-30 on SQLite, 15 kept).
    - The `post_migrate` that follows then runs only when a test changed those rows.
    - On PostgreSQL it DELETEs: Django's one TRUNCATE of about 90 tables and their
      partitions makes new files for each, about a second on a quiet machine and 3 to 5 on
      a busy one, where deleting the few rows a test leaves takes a tenth of that. The
      foreign keys (all deferrable) are checked at the flush's commit, so the order does
      not matter."""
    from django.db.backends.postgresql.base import DatabaseWrapper as OnPostgres
    from django.db.backends.sqlite3.base import DatabaseWrapper as OnSqlite

    for wrapper in (OnPostgres, OnSqlite):
        operations = wrapper.ops_class
        djangos = operations.sql_flush

        def sql_flush(
            self,
            style,
            tables,
            *,
            reset_sequences=False,
            allow_cascade=False,
            _djangos=djangos,
            _deletes=wrapper is OnPostgres,
        ):
            if reset_sequences or allow_cascade:
                return _djangos(
                    self,
                    style,
                    tables,
                    reset_sequences=reset_sequences,
                    allow_cascade=allow_cascade,
                )
            tables = [table for table in tables if table not in KEPT_BY_FLUSH]
            if not (_deletes and tables):
                return _djangos(self, style, tables)
            deletes = [f"DELETE FROM {self.quote_name(table)};" for table in tables]
            return ["SET CONSTRAINTS ALL DEFERRED;", *deletes]

        operations.sql_flush = sql_flush

    # The kept rows' `post_migrate` (content types, then permissions, app by app) is some 40
    # queries that find nothing missing: it runs only when the kept tables' counts differ
    # from what it left last time (a test deleted or added one).
    from django.core.management.commands import flush

    djangos_emit = flush.emit_post_migrate_signal
    left: dict[str, tuple[int, int]] = {}

    def kept_counts(database: str) -> tuple[int, int]:
        from django.contrib.auth.models import Permission
        from django.contrib.contenttypes.models import ContentType

        return (
            ContentType.objects.using(database).count(),
            Permission.objects.using(database).count(),
        )

    def emit_post_migrate_signal(verbosity, interactive, db, **kwargs):
        if left.get(db) == kept_counts(db):
            return
        djangos_emit(verbosity, interactive, db, **kwargs)
        left[db] = kept_counts(db)

    flush.emit_post_migrate_signal = emit_post_migrate_signal


# -- the process tier ---------------------------------------------------------------------
# A test that starts a server, a worker or a command is marked `process` (`faults`, `apart`
# and `browser` imply it), so `make test-fast` can leave those out. An unmarked test that
# starts one fails, so the fast tier stays fast by construction.
PROCESS_MARKERS = ("process", "faults", "apart", "browser")


# Fixtures that start a server, a worker or a command: a test that uses one (directly or
# through another fixture) is marked `process` at collection.
PROCESS_FIXTURES = frozenset(
    {
        "build",
        "cluster",
        "compiled",
        "crowd",
        "granian",
        "lazy_server",
        "live_server_process",
        "mesh_peer",
        "node",
        "other_origin",
        "own_redis",
        "pgbouncer",
        "postgres",
        "production_server",
        "redis_server",
        "remote_store_factory",
        "served",
        "server",
        "shared_stack",
        "shop",
        "slow_stack",
        "stack",
        "story",
    }
)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        uses = PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if (uses or _starts_processes(item)) and not item.get_closest_marker("process"):
            item.add_marker(pytest.mark.process)


def _starts_processes(item) -> bool:
    return any(item.get_closest_marker(name) for name in PROCESS_MARKERS)


@contextmanager
def _no_processes_unless_marked(item) -> Iterator[None]:
    if _starts_processes(item):
        yield
        return
    import subprocess

    started = subprocess.Popen._execute_child

    def refuse(self, args, *rest, **kwargs):
        raise RuntimeError(
            f"{item.nodeid} starts a process ({args!r:.120}): mark it `process` "
            "(pytest.mark.process) so that `make test-fast` leaves it out"
        )

    subprocess.Popen._execute_child = refuse
    try:
        yield
    finally:
        subprocess.Popen._execute_child = started


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with _no_processes_unless_marked(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _no_processes_unless_marked(item):
        yield


def service_missing(reason: str) -> None:
    """Fail under CI, skip on a developer machine."""
    if IN_CI:
        pytest.fail(f"required service missing under CI: {reason}")
    pytest.skip(reason)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def redis_url() -> str:
    # The run's own Redis (.ci/test-passes starts one on a free port) or TEST_REDIS_URL's.
    where = urlsplit(REDIS_URL)
    host, port = where.hostname or "127.0.0.1", where.port or 6379
    if not _port_open(host, port):
        service_missing(f"Redis is not reachable on {host}:{port}")
    return REDIS_URL


@pytest.fixture
def own_redis():
    """A redis-server of this test's own (tests/servers.py), to kill, restart and freeze."""
    import shutil

    from tests.servers import RedisServer

    if shutil.which("redis-server") is None:
        service_missing("redis-server is not installed")
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server of the run's own (tests/servers.py), to restart, stop and freeze:
    the fault tests' (tests/healing and the others marked `faults`)."""
    from tests.servers import PostgresServer, pg_bindir

    if pg_bindir() is None:
        service_missing("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def pgbouncer(postgres):
    """PgBouncer in transaction mode in front of `postgres` (the production topology;
    `tests.servers.through_pgbouncer` points a server at it)."""
    from tests.servers import PgBouncer, pgbouncer_binary

    if pgbouncer_binary() is None:
        service_missing("pgbouncer is not installed (apt-get install pgbouncer)")
    with PgBouncer(postgres) as bouncer:
        yield bouncer


@pytest.fixture(autouse=True)
def _fresh_remembered_ids():
    """The pairs (owner, key) -> global id a process remembers (`conversations.access`)
    hold for the life of a session; a test's sessions are rolled back with it, and the next
    test may hand the same names to other rows."""
    from gloveapp.conversations.access import forget_every_owned_session_id

    yield
    forget_every_owned_session_id()


@pytest.fixture(autouse=True)
def _no_refusals_pending():
    """The mesh's refusal counts wait in memory until a timer writes them (`mesh.refusals`):
    what one test's recipients refused must not be written into the next test's tally."""
    from mesh import refusals

    refusals.forget_pending()
    yield
    refusals.forget_pending()


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture
def requires_postgres(db) -> None:
    """Tests that only mean something on PostgreSQL run in `make test`'s PostgreSQL pass."""
    if not on_postgres():
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    """On SQLite the test database is a file, not shared-cache memory: the ORM also runs in
    other threads (sync_to_async, concurrency tests) and in subprocesses (management
    commands), and they must all see one database with real locking."""
    from django.db import connections

    settings_dict = connections["default"].settings_dict
    if settings_dict["ENGINE"] == "django.db.backends.sqlite3":
        path = tmp_path_factory.mktemp("sqlite") / "test.sqlite3"
        settings_dict.setdefault("TEST", {})["NAME"] = str(path)


# -- a real server in another process (REST remote store, chat endpoint, contract tests) ----


@pytest.fixture(scope="session")
def live_server_process():
    """Daphne in a subprocess with its own database (PostgreSQL in the PostgreSQL pass)."""
    from tests.api.liveserver import LiveServer

    with LiveServer(database_url=os.environ.get("DATABASE_URL")) as server:
        yield server


@pytest.fixture(scope="session")
def live_token(live_server_process) -> str:
    return live_server_process.token_for("remote-owner")


@pytest.fixture
async def remote_stores():
    """RemoteStores opened during a test; their sessions are deleted afterwards (the live
    server's database outlives a test, and inbox ids are global), on the test's own loop."""
    stores: list = []
    yield stores
    for store in stores:
        await store.delete_session()
        await store.aclose()


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """DRF's throttles count in the cache; each test starts with none used (and no token
    remembered by gloveapp.api.common.token_auth from another test's users)."""
    from django.core.cache import cache

    from gloveapp.api.common.token_auth import forget_all_tokens

    cache.clear()
    forget_all_tokens()


@pytest.fixture
async def close_worker_connections():
    """The entry points' database work happens in asgiref's worker thread, which keeps its own
    connection: closed after the test, so PostgreSQL can drop the test database at the end."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()


@pytest.fixture
async def turn_worker(transactional_db):
    """A turn worker in this test's process and event loop, on the configured (database)
    task queue: the same engine and fetcher `manage.py turn_worker` runs."""
    import asyncio

    from asgiref.sync import sync_to_async
    from django.db import connections

    from gloveapp.turns.engine import TurnEngine
    from gloveapp.turns.queue.fetch import fetcher_for_backend
    from gloveapp.turns.queue.tasks import enqueue_session

    engine = TurnEngine(requeue=enqueue_session, worker_id="test-worker")
    serving = asyncio.ensure_future(engine.serve(fetch=fetcher_for_backend()))
    await asyncio.sleep(0)
    yield engine
    await engine.stop(grace=5)
    serving.cancel()
    try:
        await serving
    except asyncio.CancelledError:
        pass
    # The worker's database work ran in asgiref's thread, which keeps its own connection.
    await sync_to_async(connections.close_all)()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed because PostgreSQL had no free connections says so plainly."""
    from tests.pg_budget import explain_refusal

    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None:
        return
    _add_live_server_logs(report)
    exc: BaseException | None = call.excinfo.value
    while exc is not None:
        explained = explain_refusal(exc)
        if explained:
            report.sections.append(("PostgreSQL connections", explained))
            return
        exc = exc.__cause__ or exc.__context__


def _add_live_server_logs(report) -> None:
    """A test that fails while servers of its own run (tests/api/liveserver.py) shows the
    end of their logs and their workers': a turn that never ends is explained there."""
    import sys

    liveserver = sys.modules.get("tests.api.liveserver")
    if liveserver is None:
        return
    for server in list(liveserver.LiveServer.running):
        told = f"server log:\n{server.log_tail()}\n{server.worker_logs()}"
        report.sections.append((f"live server {server.url}", told))


@pytest.fixture
def spans(monkeypatch):
    """This process's spans, in the SDK's in-memory exporter, as if an OTLP endpoint were
    set (`tracing.wanted_here()`). The global tracer provider can be set once per process:
    later tests of the run find it set and add their exporter to it."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from gloveapp.observe import tracing

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_configured", True)
    yield exporter
    exporter.shutdown()
