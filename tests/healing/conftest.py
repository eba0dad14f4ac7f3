"""The stack the healing tests break: a server and two turn workers on a PostgreSQL of the
tests' own (and, for RQ, a Redis of their own; tests/servers.py), on each task backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.liveserver import LiveServer
from tests.conftest import service_missing
from tests.healing.stack import PASSWORD
from tests.servers import PostgresServer, RedisServer, pg_bindir

# Short, so a turn whose worker died is taken back soon; the promise is this plus 10 s.
LEASE_SECONDS = 4


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    if pg_bindir() is None:
        service_missing("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        server = RedisServer()
    except RuntimeError as error:
        service_missing(str(error))
    with server:
        yield server


@pytest.fixture(scope="session", params=["db", "rq"])
def stack(request, postgres) -> Iterator[LiveServer]:
    """One per backend for the whole run (a test that kills a worker starts another)."""
    env = {
        "GLOVE_TASKS_BACKEND": request.param,
        "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
        "GLOVE_TURN_DB_THREADS": "2",
        "GLOVE_TURNS_PER_USER_PER_MINUTE": "1000",
        "GLOVE_MAX_QUEUED_MESSAGES": "50",
        "REDIS_URL": "",
    }
    if request.param == "rq":
        env["REDIS_URL"] = request.getfixturevalue("redis_server").url()
    with LiveServer(database_url=postgres.url(), extra_env=env) as server:
        server.manage(
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_user('ann', password='{PASSWORD}')",
        )
        server.start_worker()
        server.start_worker()
        yield server
