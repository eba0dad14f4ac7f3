"""Tracing never changes a response, and what it exports holds no credential, on each server.

With an exporter configured, granian's WSGI worker (`make serve-prod`) answered a path with a
character outside Latin-1 (`/api/sessions/%E2%82%AC`) with a 500: the WSGI instrumentation
assumes PEP 3333's Latin-1 text and granian hands it decoded UTF-8. An instrumentation error
now falls back to the untraced request. The signed chat URL and the approvals' signed links
are credentials: their spans carry the route's pattern, never the path or the query.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.api.liveserver import LiveServer
from tests.observe.otlp_receiver import Receiver

SECRET = "SeCrEt0credential0in0the0path"
QUERY_SECRET = "QuErY0secret"

pytestmark = pytest.mark.process


@pytest.fixture(scope="module", params=["granian-wsgi", "uvicorn", "daphne"])
def traced(request):
    with Receiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "GLOVE_TRACED_REQUESTS_PER_SECOND": "inf",
        }
        with LiveServer(extra_env=env, server=request.param) as server:
            yield server, receiver


def exported(receiver: Receiver, prefix: str, at_least: int = 1) -> list[dict]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(receiver.named(prefix)) < at_least:
        time.sleep(0.1)
    time.sleep(0.3)
    return receiver.named(prefix)


def test_a_path_outside_latin_1_is_answered_as_without_tracing(traced):
    server, _receiver = traced
    with httpx.Client(base_url=server.url, timeout=20) as client:
        euro = client.get("/api/sessions/%E2%82%AC")
        ascii_id = client.get("/api/sessions/plain")
        page = client.get("/sessions/%E2%82%AC/")

    assert euro.status_code == ascii_id.status_code == 401, euro.text
    assert page.status_code in (302, 404), page.text


def test_a_credential_in_the_path_or_query_is_never_exported(traced):
    server, receiver = traced
    with httpx.Client(base_url=server.url, timeout=20) as client:
        chat = client.post(f"/api/chat/{SECRET}?sig={QUERY_SECRET}", json={})
        link = client.get(f"/approvals/link/{SECRET}", params={"next": QUERY_SECRET})

    assert chat.status_code < 500 and link.status_code < 500
    spans = exported(receiver, "POST api/chat") + exported(receiver, "GET approvals/link")
    assert {span["name"] for span in spans} >= {
        "POST api/chat/<str:token>",
        "GET approvals/link/<str:token>",
    }
    for span in receiver.spans:
        text = repr(span["attributes"])
        assert SECRET not in text and QUERY_SECRET not in text, span
    for span in spans:
        route = "/" + span["name"].partition(" ")[2]
        urls = {k: v for k, v in span["attributes"].items() if k in ("http.target", "http.url")}
        assert urls and all(value.endswith(route) for value in urls.values()), span
