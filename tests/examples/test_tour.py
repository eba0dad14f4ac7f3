"""The tutorial's Python tour is examples/tour.py, included whole, and it runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "examples" / "tour.py"


def test_it_includes_the_tour_file_whole_in_the_tutorial():
    page = (ROOT / "docs" / "tutorial" / "python.md").read_text()

    # The site's build pastes the file in (pymdownx.snippets), so the page cannot drift.
    assert re.search(r'```python\n--8<-- "examples/tour.py"\n```', page)


def _run(*args: str, env: dict | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(TOUR), *args],
        cwd="/",  # it must not depend on being run from the checkout
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.process
def test_it_runs_the_tour_on_the_memory_store():
    assert "I'll watch for a restock" in _run()


@pytest.mark.process
def test_it_runs_the_tour_on_the_django_store(tmp_path):
    database = {"DATABASE_URL": f"sqlite:///{tmp_path / 'tour.sqlite3'}"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=ROOT,
        env={**os.environ, **database},
        check=True,
        timeout=120,
    )

    assert "I'll watch for a restock" in _run("--django", env=database)
