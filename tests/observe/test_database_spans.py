"""PostgreSQL statements are traced by the psycopg instrumentation, under the request that ran
them: a process set up as every server and worker is (`manage.py`, the OTLP endpoint set)
serves an API request, and the receiver gets its Django span with the statements below it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.observe.otlp_receiver import Receiver

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
REQUEST = """
from django.test import Client
answer = Client().get("/api/sessions", HTTP_AUTHORIZATION="Token {token}")
assert answer.status_code == 200, answer.status_code
"""


def database_url() -> str:
    """This test's PostgreSQL database, for a process of its own."""
    db = connection.settings_dict
    host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    return f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"


@pytest.mark.process
def test_a_requests_statements_are_spans_under_it(requires_postgres):
    ann = get_user_model().objects.create_user("ann")
    token = Token.objects.create(user=ann).key
    with Receiver() as receiver:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_SERVICE_NAME": "glove-db-test",
        }
        env.pop("DATABASE_DIRECT_URL", None)
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", REQUEST.format(token=token)],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=120,
        )
        # The SDK exports what is left when the process exits; the receiver may still be
        # decoding it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not receiver.named("GET "):
            time.sleep(0.1)

    [request] = receiver.named("GET ")
    statements = [
        span for span in receiver.spans if span["attributes"].get("db.system") == "postgresql"
    ]
    under_it = [span for span in statements if span["trace"] == request["trace"]]
    assert under_it, [span["name"] for span in receiver.spans]
    # The token's lookup is one of them, with its table in the text, not its values.
    texts = [span["attributes"].get("db.statement", "") for span in under_it]
    assert any("authtoken_token" in text for text in texts), texts
    assert not any(token in text for text in texts)
