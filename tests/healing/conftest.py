"""The stack the healing tests break: a server and two turn workers on a PostgreSQL of the
tests' own (and, for RQ, a Redis of their own; tests/servers.py), on each task backend.

The healing tests run the production topology: PgBouncer in transaction mode in front of
PostgreSQL (`DATABASE_URL` names PgBouncer, the LISTEN connections go to
`DATABASE_DIRECT_URL`; `through_pgbouncer`). A test keeps a direct connection to PostgreSQL
only where it tests what PgBouncer hides: the database restart on the database queue, whose
idle connections the restart cuts (behind PgBouncer, only PgBouncer's are)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.liveserver import LiveServer, add_user
from tests.conftest import service_missing
from tests.healing.stack import PASSWORD
from tests.servers import RedisServer, through_pgbouncer

# Short, so a turn whose worker died is taken back soon; the promise is this plus 10 s.
LEASE_SECONDS = 4


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        server = RedisServer()
    except RuntimeError as error:
        service_missing(str(error))
    with server:
        yield server


# Behind PgBouncer on both task backends; "db" (direct) only where a test names it.
PGBOUNCER_STACKS = ["db-pgbouncer", "rq-pgbouncer"]


@pytest.fixture(scope="session", params=PGBOUNCER_STACKS)
def stack(request, postgres) -> Iterator[LiveServer]:
    """One per backend (and way to the database) for the whole run (a test that kills a
    worker starts another)."""
    backend, _, pooler = request.param.partition("-")
    env = {
        "GLOVE_TASKS_BACKEND": backend,
        "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
        "GLOVE_TURN_DB_THREADS": "2",
        "GLOVE_TURNS_PER_USER_PER_MINUTE": "1000",
        "GLOVE_MAX_QUEUED_MESSAGES": "50",
        "REDIS_URL": "",
    }
    if backend == "rq":
        env["REDIS_URL"] = request.getfixturevalue("redis_server").url()
    server = LiveServer(database_url=postgres.url(), extra_env=env)
    if pooler:
        through_pgbouncer(server, request.getfixturevalue("pgbouncer"))
    with server:
        add_user(server.database_url, "ann", PASSWORD)
        server.start_worker()
        server.start_worker()
        yield server
