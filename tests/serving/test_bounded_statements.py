"""Every statement of an HTTP server process is bounded (GLOVE_DB_STATEMENT_TIMEOUT_SECONDS,
30 s unless DEBUG); management commands and the turn worker run unbounded unless told.

The processes are real: `gloveapp.asgi` (or Django alone, as a command) in a Python of their
own, on the test run's PostgreSQL database, asking the server for their statement_timeout.
(tests/healing/test_database_freeze.py: a frozen server answers 503 within the waits.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from gloveapp.conf import HTTP_STATEMENT_TIMEOUT_SECONDS, http_process_defaults

ROOT = Path(__file__).resolve().parents[2]


def test_an_http_process_bounds_its_statements_unless_debug_or_told_otherwise():
    production: dict[str, str] = {"DEBUG": "0"}
    http_process_defaults(production)
    assert production["GLOVE_DB_STATEMENT_TIMEOUT_SECONDS"] == str(HTTP_STATEMENT_TIMEOUT_SECONDS)

    development = {"DEBUG": "true"}
    http_process_defaults(development)
    assert "GLOVE_DB_STATEMENT_TIMEOUT_SECONDS" not in development

    told = {"DEBUG": "0", "GLOVE_DB_STATEMENT_TIMEOUT_SECONDS": "0"}
    http_process_defaults(told)
    assert told["GLOVE_DB_STATEMENT_TIMEOUT_SECONDS"] == "0"


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    database = connection.settings_dict
    url = (
        f"postgres://{database['USER']}@{database['HOST'] or '127.0.0.1'}:"
        f"{database['PORT'] or 5432}/{database['NAME']}"
    )
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GLOVE_DB_", "DJANGO_SETTINGS_MODULE", "DB_POOL_SIZE"))
    }
    environ.update({"DATABASE_URL": url, "DEBUG": "0", "REDIS_URL": "", **env})
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


SHOW = (
    "from django.db import connection\n"
    "with connection.cursor() as cursor:\n"
    "    cursor.execute('SHOW statement_timeout')\n"
    "    print(cursor.fetchone()[0])\n"
)


@pytest.mark.process
@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_an_http_server_process_runs_under_a_statement_timeout():
    # gloveapp.wsgi calls the same http_process_defaults() as gloveapp.asgi.
    answer = run_python(f"import gloveapp.asgi\n{SHOW}")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == f"{HTTP_STATEMENT_TIMEOUT_SECONDS}s"


@pytest.mark.process
@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_management_command_runs_unbounded_unless_told():
    setup = "import django, os\nos.environ['DJANGO_SETTINGS_MODULE'] = 'gloveapp.settings'\n"
    setup += "django.setup()\n"
    plain = run_python(setup + SHOW)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == "0"


@pytest.mark.process
@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_statement_past_the_timeout_is_cancelled_by_the_server():
    code = (
        "import django, os\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'gloveapp.settings'\n"
        "django.setup()\n"
        f"{SHOW}"
        "from django.db import connection, OperationalError\n"
        "try:\n"
        "    with connection.cursor() as cursor:\n"
        "        cursor.execute('SELECT pg_sleep(30)')\n"
        "except OperationalError as error:\n"
        "    print(type(error.__cause__).__name__)\n"
    )
    answer = run_python(code, GLOVE_DB_STATEMENT_TIMEOUT_SECONDS="0.5")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.split() == ["500ms", "QueryCanceled"]
