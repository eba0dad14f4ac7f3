"""The schema's fuzz (tests/api/test_schema_fuzz.py) over HTTP, against the servers people
run the way they run them: granian's WSGI worker of `make serve-prod` with every request
traced to an OTLP receiver (tracing once turned requests into 500s), and Daphne (`make run`)
with DEBUG on, which serves routes (the inbox's seed) and error pages nothing else does.
No input is a 5xx on either."""

from __future__ import annotations

import contextlib
import os

import httpx
import pytest

from tests.api.liveserver import LiveServer
from tests.api.test_schema_fuzz import SECRET, fuzz, over_http
from tests.observe.otlp_receiver import Receiver

# Mostly the servers' time: beside the busy passes (.ci/test-passes), on a database of the
# server's own.
pytestmark = [pytest.mark.apart, pytest.mark.process, pytest.mark.timeout(900)]

EXAMPLES = 2  # cases per operation, each sent bent every way: each a real request

LIVE_SERVERS = {
    "granian-wsgi, traced": ("granian-wsgi", True, {}),
    "daphne, DEBUG": ("daphne", False, {"DEBUG": "true"}),
}


@pytest.mark.parametrize("kind", LIVE_SERVERS)
def test_a_running_server_never_answers_a_fuzzed_request_with_a_5xx(kind):
    server_kind, traced, env = LIVE_SERVERS[kind]
    with contextlib.ExitStack() as stack:
        env = {**env, "GLOVE_WEBHOOK_SECRET": SECRET, "REDIS_URL": ""}
        if traced:
            receiver = stack.enter_context(Receiver())
            env |= {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
                "GLOVE_TRACED_REQUESTS_PER_SECOND": "inf",
            }
        server = stack.enter_context(
            LiveServer(
                database_url=os.environ.get("DATABASE_URL"), extra_env=env, server=server_kind
            )
        )
        token = server.token_for("fuzz-owner")
        owner = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=server.url, headers=owner, timeout=30) as api:
            raw = api.get("/api/schema/", headers={"Accept": "application/json"}).json()
            session_id = api.post("/api/sessions", json={"title": "fuzzed"}).json()["sessionId"]
            minted = api.post(f"/api/sessions/{session_id}/chat-url")
            assert minted.status_code == 200, minted.text
        chat_token = minted.json()["url"].rstrip("/").rsplit("/", 1)[1]
        fuzz(raw, session_id, chat_token, over_http(server.url, token), EXAMPLES)
        if traced:
            assert receiver.spans, "tracing was on: the receiver got spans"
