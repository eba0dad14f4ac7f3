"""The production HTTP server, granian, serves the hot routes without leaking connections.

granian runs the WSGI application on blocking threads that exit after a while idle. A
connection kept per thread (DB_CONN_MAX_AGE > 0) would stay open after its thread is gone,
one more for every thread that ever ran; with psycopg's pool (what gloveapp.wsgi sets up
under granian) a departed thread's connection is back in the pool and the next one reuses it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from gloveapp.conversations.services import session_create
from tests.servers import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
GRANIAN = str(Path(sys.executable).with_name("granian"))
THREADS = 2
IDLE_SECONDS = 5  # granian's least idle time before a blocking thread exits


def _server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return cursor.fetchone()[0]


@pytest.fixture
def granian(requires_postgres, django_user_model):
    owner = django_user_model.objects.create_user("gran")
    session_create(owner=owner, session_id="served")
    token = Token.objects.create(user=owner).key
    db = connection.settings_dict
    port = free_port()
    process = subprocess.Popen(
        [
            GRANIAN,
            "--interface",
            "wsgi",
            "gloveapp.wsgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--blocking-threads",
            str(THREADS),
            "--blocking-threads-idle-timeout",
            str(IDLE_SECONDS),
            "--no-ws",
        ],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if k not in {"GLOVE_SERVER", "DB_POOL_SIZE"}},
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "DB_CONN_MAX_AGE": "0",
            "DB_POOL_SIZE": str(THREADS),  # a connection per thread at most, at any time
            "SECRET_KEY": "granian-test-" + "x" * 40,
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Token {token}"}
    )
    try:
        for _ in range(200):
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            pytest.fail(f"granian did not come up: {process.stderr.read1().decode()}")
        yield client
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=20)


def _burst(client: httpx.Client) -> list[int]:
    post = {"messages": [{"sender": "user", "text": "A flat white, please."}]}
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(
                lambda n: (
                    (
                        client.post("/api/sessions/served/messages", json=post)
                        if n % 2
                        else client.get("/api/sessions/served/messages")
                    ).status_code
                ),
                range(40),
            )
        )
    return answers


def test_it_reuses_its_connections_after_idle_threads_exit(granian):
    assert set(_burst(granian)) == {200}
    time.sleep(IDLE_SECONDS + 1.5)  # every blocking thread idles out and exits

    assert set(_burst(granian)) == {200}

    # No more connections than the pool holds, however many threads came and went (kept
    # per thread instead, the first threads' connections outlived them: 4 here).
    assert _server_connections() <= THREADS
    assert len(granian.get("/api/sessions/served/messages").json()) == 40
