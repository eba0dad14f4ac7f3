"""A turn is one trace from the request that posted it, received over OTLP/HTTP.

`make serve-prod` (granian's HTTP workers and a turn worker) runs with
OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver this test starts, which decodes each
export with `opentelemetry-proto`. A user posts a menu question; the trace must hold the
Django request span of the POST, `invoke_agent coffee` under it (another process), two
`chat demo` spans and one `execute_tool get_catalogue` under that, with the GenAI
attributes, and token counts equal to the ones stored on the turn.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.healing.serve_prod import ServeProd, free_port
from tests.healing.stack import Browser
from tests.observe.test_prometheus_scrape import add_user

pytestmark = [pytest.mark.apart, pytest.mark.timeout(300)]


def attribute_value(value) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [attribute_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


class Receiver:
    """An OTLP/HTTP trace receiver on a free port: every span it was sent, decoded."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    for resource_spans in request.resource_spans:
                        service = {
                            a.key: attribute_value(a.value)
                            for a in resource_spans.resource.attributes
                        }.get("service.name")
                        for scope in resource_spans.scope_spans:
                            for span in scope.spans:
                                receiver.spans.append(
                                    {
                                        "name": span.name,
                                        "trace": span.trace_id.hex(),
                                        "id": span.span_id.hex(),
                                        "parent": span.parent_span_id.hex(),
                                        "service": service,
                                        "attributes": {
                                            a.key: attribute_value(a.value) for a in span.attributes
                                        },
                                    }
                                )
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def named(self, prefix: str) -> list[dict]:
        with self.lock:
            return [span for span in self.spans if span["name"].startswith(prefix)]


def stored_turn(stack: ServeProd) -> tuple[str, int, int] | None:
    database = stack.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(database, timeout=10) as conn:
        return conn.execute("SELECT status, tokens_in, tokens_out FROM turns_turn").fetchone()


def test_a_turn_is_one_trace_from_the_posting_request_with_genai_spans():
    with Receiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "glove-test",
        }
        with ServeProd(http_workers=1, ws_workers=2, turn_workers=1, extra_env=env) as stack:
            add_user(stack, "ann")
            browser = Browser(stack, username="ann")
            session_id = browser.new_session()
            posted = browser.post(f"/sessions/{session_id}/messages", {"text": "show me the menu"})
            assert posted.status_code == 303

            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                row = stored_turn(stack)
                if row and row[0] not in ("queued", "running") and receiver.named("chat "):
                    if len(receiver.named("chat ")) >= 2 and receiver.named("invoke_agent"):
                        break
                time.sleep(0.2)
            status, tokens_in, tokens_out = stored_turn(stack)
            assert status == "done", stack.log_tail()

    [agent] = receiver.named("invoke_agent ")
    assert agent["name"] == "invoke_agent coffee"
    assert agent["service"] == "glove-test"
    assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert agent["attributes"]["gen_ai.agent.name"] == "coffee"
    assert agent["attributes"]["glove.turn.attempt"] == 1
    assert agent["attributes"]["glove.turn.status"] == "done"

    # Its parent is the Django request that posted the message, in the HTTP worker.
    [request] = [span for span in receiver.spans if span["id"] == agent["parent"]]
    assert request["trace"] == agent["trace"] and request["parent"] == ""
    assert request["name"] == "POST sessions/<str:session_id>/messages"
    assert request["attributes"]["http.status_code"] == 303

    chats = [span for span in receiver.named("chat ") if span["trace"] == agent["trace"]]
    assert [span["name"] for span in chats] == ["chat demo", "chat demo"]
    assert all(span["parent"] == agent["id"] for span in chats)
    assert {span["attributes"]["gen_ai.request.model"] for span in chats} == {"demo"}
    assert sum(span["attributes"]["gen_ai.usage.input_tokens"] for span in chats) == tokens_in
    assert sum(span["attributes"]["gen_ai.usage.output_tokens"] for span in chats) == tokens_out
    assert all(span["attributes"]["gen_ai.provider.name"] == "demo" for span in chats)

    [tool] = receiver.named("execute_tool ")
    assert tool["name"] == "execute_tool get_catalogue"
    assert tool["parent"] == agent["id"] and tool["trace"] == agent["trace"]
    assert tool["attributes"]["glove.tool.outcome"] == "success"
