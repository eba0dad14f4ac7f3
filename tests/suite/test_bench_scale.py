"""bench/scale.py --quick runs end to end: both databases built, both servers up, every path
measured at both sizes and answered, the floor beside them, one JSON document with goals.

No timing is asserted (the bench's figures are the bench's); this keeps it runnable.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _port_open, service_missing

pytestmark = [pytest.mark.apart, pytest.mark.postgres, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_scale_bench_measures_every_path_at_both_sizes():
    if not _port_open("127.0.0.1", 5432):
        service_missing("PostgreSQL is not reachable on 127.0.0.1:5432")
    sys.path.insert(0, str(ROOT))
    from bench.scale import PATHS
    from bench.scale import Path as BenchPath

    name = f"glove_scale_test_{secrets.token_hex(3)}"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GLOVE_DB_", "DJANGO_SETTINGS_MODULE", "DB_POOL_SIZE"))
    }
    done = subprocess.run(
        [
            sys.executable,
            "bench/scale.py",
            "--quick",
            "--requests",
            "1",
            "--workers",
            "1",
            "--database-url",
            f"postgres://postgres@127.0.0.1:5432/{name}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    document = json.loads(done.stdout)

    measured = {row["measure"]: row for row in document["measures"]}
    static = [path.name for path in PATHS]
    assert list(measured)[: len(static)] == static
    # Then every value of every admin filter and every sortable column both ways, read from
    # the small database's admin, and every changelist's first row's page.
    extra = list(measured)[len(static) :]
    kinds = ("admin filter /admin/", "admin sort /admin/", "admin change page ")
    assert all(name.startswith(kinds) for name in extra), extra[:5]
    filters = [name for name in extra if name.startswith(kinds[0])]
    admins = {name.split("/")[2] for name in filters}
    assert {"turns", "approvals", "conversations", "django_tasks_database"} <= admins, admins
    sorts = {name for name in extra if name.startswith(kinds[1])}
    assert "admin sort /admin/turns/turn/?o=1" in sorts, sorted(sorts)[:5]
    assert "admin sort /admin/turns/turn/?o=-1" in sorts, sorted(sorts)[:5]
    pages = {name.removeprefix(kinds[2]) for name in extra if name.startswith(kinds[2])}
    assert {"turns_turn", "axes_accesslog", "budgets_budgetreservation"} <= pages, pages
    oks = {path.name: path.ok for path in PATHS} | {name: BenchPath.ok for name in extra}
    for row in measured.values():
        for size in ("large", "small"):
            statuses = row[f"{size}_statuses"]
            assert sum(statuses.values()) == 1 and set(statuses) <= set(oks[row["measure"]]), (
                row["measure"],
                size,
                row,
            )
            # A body, unless the right answer is a redirect (a deep page past the last).
            assert row[f"{size}_bytes"] or set(statuses) <= {"301", "302"}, row
        assert row["ratio_p50"] > 0
    assert measured["floor: GET /healthz"]["large_bytes"] < 100
    sizes = document["config"]["sizes"]
    assert sizes["large"]["messages"] > 5 * sizes["small"]["messages"]
    assert {g["goal"] for g in document["goals"]} >= {"no one-screen view over 1 MB"}
