"""How many PostgreSQL connections a concurrency test may open, and why the server said no.

The server is shared (`make test`'s PostgreSQL pass, other suites, the live server
subprocess): a test that opens one connection per thread takes what is free minus a
margin for the others, and a refusal is reported with its cause and the way out.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# Left for everything else on the server: the test's own connection, live servers, other
# suites starting up while this one runs.
SPARE_CONNECTIONS = 10
REFUSAL_MARKERS = (
    "too many clients",
    "too many connections",
    "remaining connection slots are reserved",
)


def free_connections(conn: Any) -> int:
    """Connections the server still accepts from a non-superuser: `max_connections` minus
    those open and those reserved for superusers."""
    row = conn.execute(
        "SELECT current_setting('max_connections')::int"
        " - current_setting('superuser_reserved_connections')::int"
        " - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
    ).fetchone()
    return int(row[0])


def concurrency_for(
    wanted: int, *, free: int, spare: int = SPARE_CONNECTIONS, processes: int = 1
) -> int:
    """At most `wanted` threads, each with a connection, within `free` minus `spare`, shared
    out among `processes` test processes that may ask at the same moment (pytest-xdist)."""
    allowed = free - spare
    if allowed < 2:
        pytest.fail(
            f"PostgreSQL is nearly full: only {free} of its connections are free and this "
            f"test needs at least {spare + 2}. Run fewer suites at once or raise "
            "max_connections."
        )
    return min(wanted, max(2, allowed // processes))


def django_concurrency_for(wanted: int) -> int:
    """`concurrency_for` against Django's default database (no limit on SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return wanted
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    with connection.cursor() as cursor:
        return concurrency_for(wanted, free=free_connections(cursor), processes=processes)


def explain_refusal(exc: BaseException) -> str | None:
    """A plain-words account of "the server refused the connection", else None."""
    text = str(exc)
    if type(exc).__name__ != "OperationalError" or not any(
        marker in text for marker in REFUSAL_MARKERS
    ):
        return None
    return (
        "PostgreSQL refused a connection because it has no free connection slots "
        f"({text.strip().splitlines()[0]}). The server's max_connections is shared by every "
        "suite and program using it: run fewer suites at once, stop idle clients, or raise "
        "max_connections (SHOW max_connections; SELECT count(*) FROM pg_stat_activity)."
    )
