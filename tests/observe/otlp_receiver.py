"""An OTLP/HTTP trace receiver for the tests: a server on a free port that decodes each
export with `opentelemetry-proto` and keeps every span it was sent."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.healing.serve_prod import free_port


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
                        resource = {
                            a.key: attribute_value(a.value)
                            for a in resource_spans.resource.attributes
                        }
                        for scope in resource_spans.scope_spans:
                            for span in scope.spans:
                                receiver.spans.append(decoded(span, resource))
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


def decoded(span, resource: dict) -> dict:
    return {
        "name": span.name,
        "trace": span.trace_id.hex(),
        "id": span.span_id.hex(),
        "parent": span.parent_span_id.hex(),
        "service": resource.get("service.name"),
        "process": resource.get("service.instance.id"),
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "links": [(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
        "attributes": {a.key: attribute_value(a.value) for a in span.attributes},
    }
