"""`make chaos` runs: its quick mode, on one fault, end to end (its own PostgreSQL and Redis,
`make serve-prod`, load, the fault, the accounting), and writes its row where it is told.

The long run is `make chaos` itself (bench/chaos.py); this keeps it working.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.conftest import service_missing
from tests.healing.serve_prod import ROOT
from tests.servers import pg_bindir

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600)]


def test_make_chaos_quick_kills_an_http_worker_under_load_and_counts_nothing_lost(tmp_path):
    if pg_bindir() is None or shutil.which("redis-server") is None:
        service_missing("make chaos needs PostgreSQL's initdb and redis-server")
    results = tmp_path / "results.json"
    # Another bench's row, which the run must keep.
    results.write_text(json.dumps([{"script": "bench/rest.py", "measure": "kept"}]))
    done = subprocess.run(
        # The venv is there already: never a pip install inside a test.
        ["make", "-s", "-o", ".venv/.installed-dev", "-o", ".venv/.installed-run", "chaos"],
        cwd=ROOT,
        env={
            **os.environ,
            "CHAOS_QUICK": "1",
            "CHAOS_FAULTS": "kill_http_worker",
            "CHAOS_RESULTS": str(results),
        },
        capture_output=True,
        text=True,
        timeout=540,
    )
    print(done.stdout, done.stderr[-3000:])
    rows = json.loads(results.read_text())
    assert {"script": "bench/rest.py", "measure": "kept"} in rows
    [row] = [r for r in rows if r.get("measure") == "kill_http_worker"]
    assert row["acknowledged"] > 0, row
    assert row["lost"] == 0 and row["duplicated"] == 0, row
    assert row["heal_s"] is not None, row
    [verdict] = [r for r in rows if r.get("measure") == "goal"]
    assert verdict["issue"] == 21
    assert "| kill_http_worker |" in done.stdout
