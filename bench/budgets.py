"""Budgets: what the check adds to a model call on PostgreSQL, with 10,000 budgets and a
ledger of 1,000,000 settled reservations.

A model call of a turn makes two trips through the budgets, one statement each:
`budget_reserve` before the call (the windows' counters locked in id order, the blocking
caps checked, the counters' update and the ledger rows inserted, all in one statement, which
also checks that the budgets this process keeps for the subject are current: their
generation) and `budget_settle` after (the rows and counters moved to the actual cost). Both
are timed together, per call, in this process against a database of its own (created on the
server of `--database-url`, migrated, loaded, dropped after): 10,000 budgets (one per user
for 9,900 users, 50 per group, 49 per agent, one for everyone) and 1,000,000 settled ledger
rows over 10,000 counters, ANALYZEd. The calls are those of a user whom four budgets fit
(their own, their group's, their agent's, everyone's): four counters per call.

- `alone`: one call at a time;
- `contended`: 8 threads at once, each a user of its own, all sharing the everyone budget's
  counter (a hot row: its lock orders them);
- `after a change`: one call at a time, each after a budget was changed (an UPDATE of one
  budget, outside the timing, as an admin's save): the reservation finds its budgets out of
  date, writes nothing, and the call is checked again with them read anew (three statements);
- `none apply`: a user and agent no budget names, the everyone budgets removed: what the
  check costs when it finds nothing (the budgets' generation read, one small statement);
- floors, each measured right after every `alone` call on the same connection: a bare
  `SELECT 1` (one round trip) and a bare single-row INSERT in autocommit (one round trip
  and a commit that waits for the disk). On PostgreSQL the reservation and the settlement
  are one statement each, whose commits do not wait for the disk
  (docs/howto/budgets.md, "What it costs"): the call costs about two round trips.

The subject (the user's name and groups) is read once per turn attempt, not per call: it is
outside the timing, and so is a subject's first call in the process, which reads its budgets
(the warm-up's). Goal (issue 42): the check adds <= 2 ms p99 to a model call (`alone`).
Prints JSON.

    .venv/bin/python bench/budgets.py [--database-url postgres://postgres@127.0.0.1:5432/x]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal, percentile  # noqa: E402

BUDGETS = 10_000
LEDGER = 1_000_000
CALLS = 2_000
WARMUP = 200
CHANGED_CALLS = 200
THREADS = 8
GOAL_MS = 2.0


def setup(database_url: str) -> tuple[str, str]:
    """A fresh database on the server of `database_url`, migrated; (its url, admin url)."""
    base, _, _ = database_url.rpartition("/")
    name = f"glove_bench_budgets_{secrets.token_hex(4)}"
    admin = f"{base}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{base}/{name}"
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    return url, admin


def load(url: str) -> None:
    """10,000 budgets, 10,000 counters, 1,000,000 settled reservations (set-based SQL)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO budgets_budget (key, name, scope, target, "window", cap_usd,
                                        cap_tokens, cap_turns, action, active, created_at,
                                        updated_at)
            SELECT 'b' || n, '',
                   CASE WHEN n < 9900 THEN 'user' WHEN n < 9950 THEN 'group'
                        WHEN n < 9999 THEN 'agent' ELSE 'everyone' END,
                   CASE WHEN n < 9900 THEN 'user' || n WHEN n < 9950 THEN 'group' || (n - 9900)
                        WHEN n < 9999 THEN 'agent' || (n - 9950) ELSE '' END,
                   CASE WHEN n %% 3 = 0 THEN 'month' ELSE 'day' END,
                   1000000, NULL, NULL, 'warn', true, now(), now()
              FROM generate_series(0, %s - 1) AS n
            """,
            [BUDGETS],
        )
        conn.execute(
            """
            INSERT INTO budgets_budgetcounter (budget_key, window_key, ends_at, spent_usd,
                   reserved_usd, spent_tokens, reserved_tokens, turns, started)
            SELECT 'b' || n, 'u:' || n || '|d:2026-01-01', now() - interval '1 day', 1, 0,
                   1000, 0, 0, '[]'
              FROM generate_series(0, %s - 1) AS n
            """,
            [BUDGETS],
        )
        conn.execute(
            """
            INSERT INTO budgets_budgetreservation (counter_id, budget_key, window_key, turn_id,
                   attempt, model, state, reserved_usd, settled_usd, reserved_tokens,
                   settled_tokens, created_at, settled_at)
            SELECT 1 + n %% %s, 'b' || (n %% %s), 'u:' || (n %% %s) || '|d:2026-01-01', n / 3,
                   1, 'claude-sonnet-4-5', 'settled', 0.01, 0.004, 4000, 1500,
                   now() - (n || ' seconds')::interval, now() - (n || ' seconds')::interval
              FROM generate_series(0, %s - 1) AS n
            """,
            [BUDGETS, BUDGETS, BUDGETS, LEDGER],
        )
        conn.execute("ANALYZE")


def users(count: int) -> list:
    """Users named like the per-user budgets (user0...), each in a group named by one."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    model = get_user_model()
    made = model.objects.bulk_create([model(username=f"user{n}") for n in range(count)])
    group = Group.objects.create(name="group0")
    group.user_set.add(*made)
    return made


def one_call(subject) -> float:
    from gloveapp.budgets.services import budget_reserve, budget_settle

    started = time.perf_counter()
    held = budget_reserve(subject=subject, usd=Decimal("0.0630"), tokens=4200, model="m")
    budget_settle(held=held, usd=Decimal("0.0251"), tokens=1700)
    return time.perf_counter() - started


def statements_and_cpu(subject) -> tuple[int, float]:
    """The statements one call sends (BEGIN and COMMIT included), and this process's CPU
    time per call (the client's share; the machine's load does not move it much)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        one_call(subject)
    started = time.process_time()
    for _ in range(200):
        one_call(subject)
    return len(captured.captured_queries), (time.process_time() - started) / 200


def summary(samples: list[float]) -> dict:
    return {
        "calls": len(samples),
        "p50_ms": round(percentile(samples, 0.5) * 1000, 3),
        "p99_ms": round(percentile(samples, 0.99) * 1000, 3),
        "max_ms": round(max(samples) * 1000, 3),
    }


def bare_select() -> float:
    """A floor: one round trip (`SELECT 1`) on the calls' connection."""
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return time.perf_counter() - started


def bare_insert() -> float:
    """A floor: one row inserted and committed (autocommit: one round trip and a commit that
    waits for the disk), on the calls' connection."""
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO bench_floor (at) VALUES (now())")
    return time.perf_counter() - started


def measure_alone(subject) -> tuple[list[float], list[float], list[float]]:
    """One call at a time, each followed by the two floors on the same connection (so the
    machine's moments weigh on all three alike): (calls, SELECT 1, INSERT + commit)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, at timestamptz)"
        )
    for _ in range(WARMUP):
        one_call(subject)
        bare_select()
        bare_insert()
    calls, selects, inserts = [], [], []
    for _ in range(CALLS):
        calls.append(one_call(subject))
        selects.append(bare_select())
        inserts.append(bare_insert())
    return calls, selects, inserts


def measure_after_a_change(subject) -> list[float]:
    """One call at a time, each after one budget of the subject's changed (not timed)."""
    from gloveapp.budgets.models import Budget

    samples = []
    for n in range(CHANGED_CALLS):
        Budget.objects.filter(scope="everyone").update(name=f"changed {n}")
        samples.append(one_call(subject))
    return samples


def measure_contended(subjects: list) -> list[float]:
    from django.db import connections

    samples: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(subjects))

    def work(subject) -> None:
        try:
            for _ in range(WARMUP // 4):
                one_call(subject)
            barrier.wait()
            mine = [one_call(subject) for _ in range(CALLS // len(subjects))]
            with lock:
                samples.extend(mine)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(subject,)) for subject in subjects]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/glove_budgets_bench"
    )
    args = parser.parse_args()
    url, admin = setup(args.database_url)
    try:
        started = time.perf_counter()
        load(url)
        loaded_in = time.perf_counter() - started
        from django.db import connection

        from gloveapp.budgets.applying import applicable, subject_for
        from gloveapp.budgets.models import Budget

        people = users(THREADS)
        subjects = [
            subject_for(user_id=user.pk, agent="agent0", session_id=f"s{n}", turn_id=n)
            for n, user in enumerate(people)
        ]
        applying = len(applicable(subjects[0]))
        alone, select_floor, insert_floor = measure_alone(subjects[0])
        statements, cpu = statements_and_cpu(subjects[0])
        changed = measure_after_a_change(subjects[0])
        contended = measure_contended(subjects)
        Budget.objects.filter(scope="everyone").delete()
        nobody = subject_for(user_id=None, agent="no-such-agent", session_id="s-none")
        none_apply = measure_alone(nobody)[0]
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM budgets_budgetreservation")
            (ledger_rows,) = cursor.fetchone()
        connection.close()
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{url.rpartition("/")[2]}" WITH (FORCE)')
    measures = {
        "alone": summary(alone),
        "contended (8 threads, one shared counter)": summary(contended),
        "after a change (the budgets read anew)": summary(changed),
        "none apply": summary(none_apply),
        "floor: SELECT 1 (one round trip)": summary(select_floor),
        "floor: INSERT + commit (one durable write)": summary(insert_floor),
    }
    one_trip = measures["floor: SELECT 1 (one round trip)"]
    durable = measures["floor: INSERT + commit (one durable write)"]
    ratios = {
        "alone / SELECT 1, p50": round(measures["alone"]["p50_ms"] / one_trip["p50_ms"], 2),
        "alone / SELECT 1, p99": round(measures["alone"]["p99_ms"] / one_trip["p99_ms"], 2),
        "alone / INSERT + commit, p50": round(measures["alone"]["p50_ms"] / durable["p50_ms"], 2),
        "alone / INSERT + commit, p99": round(measures["alone"]["p99_ms"] / durable["p99_ms"], 2),
    }
    print(
        json.dumps(
            {
                "bench": "budgets",
                "machine": machine(),
                "database": "postgresql",
                "budgets": BUDGETS,
                "ledger_rows": ledger_rows,
                "budgets_per_call": applying,
                "statements_per_call": statements,
                "client_cpu_ms_per_call": round(cpu * 1000, 3),
                "note": "wall times on a shared 2-core machine under load (load_average): "
                "PostgreSQL and this process wait for a core; see bench/README.md",
                "load_seconds": round(loaded_in, 1),
                "measures": measures,
                "ratios": ratios,
                "goals": [
                    goal(
                        42,
                        "the budget check adds <= 2 ms p99 to a model call (PostgreSQL, "
                        "10,000 budgets, 1M settled reservations)",
                        f"{measures['alone']['p99_ms']} ms p99 (reserve + settle, "
                        f"{applying} budgets a call)",
                        measures["alone"]["p99_ms"] <= GOAL_MS,
                    )
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
