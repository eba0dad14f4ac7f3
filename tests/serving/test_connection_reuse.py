"""Database connections are reused under every server, and never leaked (issue 13).

Under ASGI each request's sync code may run on a thread of its own, so a persistent
connection (DB_CONN_MAX_AGE > 0) would be opened per request and never closed: the system
check and the ASGI entry point refuse it. Under WSGI (gunicorn) persistent connections are
the way to reuse them; under ASGI, psycopg's pool.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.checks import run_checks

ROOT = Path(__file__).resolve().parents[2]


def ids() -> list[str]:
    return [message.id for message in run_checks(tags=["glove"])]


def test_it_refuses_persistent_connections_under_asgi(settings):
    settings.GLOVE_SERVER = "asgi"
    settings.DATABASES = {**settings.DATABASES}
    settings.DATABASES["default"] = {**settings.DATABASES["default"], "CONN_MAX_AGE": 60}

    assert "glove.E006" in ids()


def test_it_refuses_connections_kept_forever_under_asgi(settings):
    settings.GLOVE_SERVER = "asgi"
    settings.DATABASES = {**settings.DATABASES}
    settings.DATABASES["default"] = {**settings.DATABASES["default"], "CONN_MAX_AGE": None}

    assert "glove.E006" in ids()


def test_it_accepts_persistent_connections_under_wsgi(settings):
    settings.GLOVE_SERVER = "wsgi"
    settings.DATABASES = {**settings.DATABASES}
    settings.DATABASES["default"] = {**settings.DATABASES["default"], "CONN_MAX_AGE": 600}

    assert "glove.E006" not in ids()


def test_it_passes_the_check_as_shipped():
    assert "glove.E006" not in ids()


def settings_in_a_process(
    module: str, *, under: str = "", **env: str
) -> subprocess.CompletedProcess:
    """Import an entry point (gloveapp.asgi / gloveapp.wsgi) in a fresh process, after the
    server's own package (`under`) as the server does."""
    code = (
        (f"import {under}\n" if under else "") + f"import {module}\n"
        "from django.conf import settings\n"
        "db = settings.DATABASES['default']\n"
        "print(settings.GLOVE_SERVER, db.get('CONN_MAX_AGE'), 'pool' in db.get('OPTIONS', {}))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in {"GLOVE_SERVER", "DB_POOL_SIZE"}}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "gloveapp.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.process
def test_it_will_not_serve_asgi_with_persistent_connections():
    done = settings_in_a_process(
        "gloveapp.asgi", DATABASE_URL="postgres://postgres@127.0.0.1:5432/x", DB_CONN_MAX_AGE="60"
    )

    assert done.returncode != 0
    assert "leaks one connection per request under ASGI" in done.stderr


@pytest.mark.process
def test_it_pools_postgresql_connections_under_asgi():
    done = settings_in_a_process(
        "gloveapp.asgi", DATABASE_URL="postgres://postgres@127.0.0.1:5432/x"
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["asgi", "0", "True"]


@pytest.mark.process
def test_it_keeps_connections_per_thread_under_wsgi():
    done = settings_in_a_process(
        "gloveapp.wsgi", DATABASE_URL="postgres://postgres@127.0.0.1:5432/x", DB_CONN_MAX_AGE="600"
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["wsgi", "600", "False"]


@pytest.mark.process
def test_it_pools_postgresql_connections_under_granian():
    done = settings_in_a_process(
        "gloveapp.wsgi", under="granian", DATABASE_URL="postgres://postgres@127.0.0.1:5432/x"
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["granian", "0", "True"]


@pytest.mark.process
def test_it_will_not_serve_granian_with_persistent_connections():
    done = settings_in_a_process(
        "gloveapp.wsgi",
        under="granian",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/x",
        DB_CONN_MAX_AGE="600",
    )

    assert done.returncode != 0
    assert "leaks connections under granian" in done.stderr


@pytest.mark.process
def test_it_runs_sqlite_in_wal_with_normal_sync_and_immediate_transactions(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup()\n"
            "from django.db import connection\n"
            "c = connection.cursor()\n"
            "print(c.execute('PRAGMA journal_mode').fetchone()[0],"
            " c.execute('PRAGMA synchronous').fetchone()[0],"
            " connection.transaction_mode)\n",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'wal.sqlite3'}",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    # synchronous: 1 is NORMAL (2 would be FULL).
    assert done.stdout.split() == ["wal", "1", "IMMEDIATE"]
