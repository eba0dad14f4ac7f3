"""Budgets with real turn workers on PostgreSQL: a server and `manage.py turn_worker`
processes on a database of their own (tests/api/liveserver.py) on the run's PostgreSQL server
or one of the test's own, in the fault pass whatever its database, the priced test agent whose
model reports real token counts, and a daily budget of $1.00 for everyone
(tests/budgets/live_settings.py).

- A hundred turns posted at once spend at most the cap plus one call's reserved maximum.
- A worker SIGKILLed in the middle of a model call leaves the ledger balanced: the turn is
  taken back, the dead call's reservation settled at its maximum, nothing stays reserved;
  the same with PostgreSQL restarted (a server of its own) while the turns are taken back.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.liveserver import LiveServer
from tests.conftest import service_missing
from tests.healing.stack import query, until, wait_until_finished
from tests.servers import PostgresServer, pg_bindir, port_open, run_postgres_admin_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.process,
    pytest.mark.timeout(300),
]

TURNS = 100
CAP = Decimal("1.00")
LEASE_SECONDS = 4


@pytest.fixture
def database_base() -> str:
    """The test run's PostgreSQL server, whatever the pass's own database: the live server
    makes a database of its own there."""
    admin_url = run_postgres_admin_url()
    address = urlsplit(admin_url)
    if not port_open(address.port or 5432, address.hostname or "127.0.0.1"):
        service_missing(f"PostgreSQL is not reachable at {address.netloc}")
    return admin_url


def _server(database_base: str, **env: str) -> LiveServer:
    return LiveServer(
        database_url=database_base,
        extra_env={
            "DJANGO_SETTINGS_MODULE": "tests.budgets.live_settings",
            "GLOVE_TURNS_PER_USER_PER_MINUTE": "100000",
            "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
            "GLOVE_TURN_DB_THREADS": "2",
            "REDIS_URL": "",
            **env,
        },
    )


def _client(server: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, timeout=60, headers={"Authorization": f"Token {token}"}
    )


def _sessions(client: httpx.Client, count: int) -> list[str]:
    keys = []
    for n in range(count):
        response = client.post("/api/sessions", json={"sessionId": f"spend_{n}", "title": "x"})
        assert response.status_code == 201, response.text
        keys.append(response.json()["sessionId"])
    return keys


def _ledger(database_url: str) -> dict[str, Decimal]:
    (row,) = query(
        database_url,
        "SELECT coalesce(sum(reserved_usd), 0), "
        "coalesce(sum(settled_usd) FILTER (WHERE state = 'settled'), 0), "
        "coalesce(sum(reserved_usd - settled_usd) FILTER (WHERE state <> 'reserved'), 0), "
        "count(*) FILTER (WHERE state = 'reserved'), coalesce(max(reserved_usd), 0), count(*) "
        "FROM budgets_budgetreservation WHERE budget_key = 'daily-dollar'",
    )
    reserved, settled, released, still_open, largest, rows = row
    return {
        "reserved": reserved,
        "settled": settled,
        "released": released,
        "open": still_open,
        "largest": largest,
        "rows": rows,
    }


def test_a_hundred_concurrent_turns_spend_at_most_the_cap_and_one_calls_maximum(database_base):
    with _server(database_base) as server:
        server.start_worker()
        server.start_worker()
        token = server.token_for("ann")
        client = _client(server, token)
        sessions = _sessions(client, TURNS)

        def start(key: str) -> int:
            with _client(server, token) as own:
                return own.post(
                    f"/api/sessions/{key}/agent/turns", json={"text": "hello"}
                ).status_code

        with ThreadPoolExecutor(max_workers=16) as pool:
            statuses = list(pool.map(start, sessions))
        finished = wait_until_finished(server.database_url, 240)
        assert finished is not None, server.worker_logs()
        ledger = _ledger(server.database_url)
        turns = dict(
            query(server.database_url, "SELECT status, count(*) FROM turns_turn GROUP BY 1")
        )
        (spent,) = query(
            server.database_url,
            "SELECT coalesce(sum(spent_usd), 0), coalesce(sum(reserved_usd), 0) "
            "FROM budgets_budgetcounter WHERE budget_key = 'daily-dollar'",
        )
        print(
            f"\n{TURNS} turns posted: {statuses.count(202)} accepted, {statuses.count(429)} "
            f"refused at their start; turns by status {turns}; spent ${spent[0]} of ${CAP} "
            f"(largest reservation ${ledger['largest']})"
        )

    assert set(statuses) <= {202, 429} and statuses.count(202) > 0
    assert turns.get("done", 0) > 0 and turns.get("failed", 0) + statuses.count(429) > 0
    assert spent[1] == 0 and ledger["open"] == 0
    assert spent[0] <= CAP + ledger["largest"]
    assert ledger["reserved"] == ledger["settled"] + ledger["released"]


def test_a_worker_killed_mid_call_leaves_the_ledger_balanced_and_nothing_reserved(
    database_base,
):
    with _server(database_base, GLOVE_TEST_SLOW_SECONDS="6") as server:
        victim = server.start_worker()
        token = server.token_for("ann")
        client = _client(server, token)
        (key,) = _sessions(client, 1)
        started = client.post(f"/api/sessions/{key}/agent/turns", json={"text": "slow please"})
        assert started.status_code == 202, started.text

        reserved = until(lambda: _ledger(server.database_url)["open"], timeout=60)
        assert reserved, server.worker_logs()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed_at = time.monotonic()
        server.start_worker()
        finished = wait_until_finished(server.database_url, LEASE_SECONDS + 60)
        assert finished is not None, server.worker_logs()
        ledger = _ledger(server.database_url)
        rows = query(
            server.database_url,
            "SELECT attempt, state, reserved_usd, settled_usd FROM budgets_budgetreservation "
            "ORDER BY id",
        )
        (turn,) = query(server.database_url, "SELECT status, attempts FROM turns_turn")
        print(f"\nkilled mid-call; healed in {round(time.monotonic() - killed_at, 1)} s: {rows}")

    assert turn == ("done", 2)
    dead, retry = rows
    # The dead call may have been billed: settled at its maximum; the retry at its usage.
    assert dead[:2] == (1, "settled") and dead[3] == dead[2]
    assert retry[:2] == (2, "settled") and retry[3] < retry[2]
    assert ledger["open"] == 0
    assert ledger["reserved"] == ledger["settled"] + ledger["released"]


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_worker_killed_mid_call_and_postgresql_restarted_leave_the_ledger_balanced(mode):
    """The same death, and the database restarted while the turn is taken back: the
    ledger's rows are written in the transactions that change the counters, so a restart
    loses none and doubles none. `immediate` is a crash of PostgreSQL (no shutdown
    checkpoint): the reservations' commits do not wait for the disk, so the newest may be
    lost, each whole (its rows and its counters' change together): the ledger balances."""
    if pg_bindir() is None:
        service_missing("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    with PostgresServer() as postgres:
        with _server(postgres.url(), GLOVE_TEST_SLOW_SECONDS="6") as server:
            victim = server.start_worker()
            token = server.token_for("ann")
            client = _client(server, token)
            keys = _sessions(client, 3)
            for key in keys:
                started = client.post(f"/api/sessions/{key}/agent/turns", json={"text": "slow"})
                assert started.status_code == 202, started.text

            assert until(lambda: _ledger(server.database_url)["open"], timeout=60), (
                server.worker_logs()
            )
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            survivor = server.start_worker()
            away = postgres.restart(mode)
            finished = wait_until_finished(server.database_url, LEASE_SECONDS + 120)
            assert finished is not None, server.worker_logs()
            assert survivor.poll() is None, server.worker_logs()  # it lived through the restart
            ledger = _ledger(server.database_url)
            turns = query(server.database_url, "SELECT status, attempts FROM turns_turn")
            (counter,) = query(
                server.database_url,
                "SELECT coalesce(sum(spent_usd), 0), coalesce(sum(reserved_usd), 0) "
                "FROM budgets_budgetcounter WHERE budget_key = 'daily-dollar'",
            )
            print(f"\nkilled, PostgreSQL away {away:.1f} s; turns {turns}; ledger {ledger}")

    assert sorted(status for status, _ in turns) == ["done"] * 3
    assert ledger["open"] == 0 and counter[1] == 0
    assert ledger["reserved"] == ledger["settled"] + ledger["released"]
    # The counters hold exactly what the ledger settled: nothing counted twice or lost.
    assert counter[0] == ledger["settled"]
