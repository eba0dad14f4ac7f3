"""A tiny scripted HTTP server in a thread, for driving the real provider SDKs offline.

Each POST is recorded (path, headers, JSON body) and answered with the next queued `Reply`:
a JSON body with any status, or a server-sent-event stream. A stream can `hang_after` some
events, holding the connection open until the client goes away, which is how abort tests
check that the adapter really closed the stream.

`FakeProvider` is a model provider's API on it (one POST route, requests checked as the real
API checks them); `anthropic_server` and `openai_server` say only what differs.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SseEvent = tuple[str | None, str]  # (event name or None, data line)


@dataclass
class Reply:
    status: int = 200
    json_body: Any = None
    sse: list[SseEvent] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Streams only: after this many events stop sending and wait for the client to disconnect.
    hang_after: int | None = None
    # Streams only: pause between events, so deltas arrive as separate reads.
    event_delay: float = 0.0


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """Start with `with FakeServer(...) as server:`; `server.url` is `http://127.0.0.1:<port>`."""

    def __init__(
        self,
        no_reply: Reply | None = None,
        validate: Callable[[str, Any], Reply | None] | None = None,
    ) -> None:
        # `validate(path, body)` may reject a request the way the real API would (e.g. a 400).
        self._validate = validate
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._no_reply = no_reply or Reply(status=500, json_body={"error": "no scripted reply"})
        self._lock = threading.Lock()
        self.released = threading.Event()
        self.client_disconnected = threading.Event()
        self.stream_started = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._replies.popleft() if self._replies else self._no_reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with fake._lock:
                    fake.requests.append(
                        RecordedRequest(
                            method="POST",
                            path=self.path,
                            headers={key.lower(): value for key, value in self.headers.items()},
                            body=body,
                        )
                    )
                rejection = fake._validate(self.path, body) if fake._validate else None
                reply = rejection or fake._next_reply()
                if reply.sse is not None:
                    self._stream(reply)
                else:
                    self._json(reply)

            def _json(self, reply: Reply) -> None:
                payload = json.dumps(reply.json_body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, reply: Reply) -> None:
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                fake.stream_started.set()
                events = reply.sse or []
                try:
                    for sent, (event, data) in enumerate(events):
                        if reply.hang_after is not None and sent >= reply.hang_after:
                            self._hang()
                            return
                        frame = (f"event: {event}\n" if event else "") + f"data: {data}\n\n"
                        self.wfile.write(frame.encode())
                        self.wfile.flush()
                        if reply.event_delay:
                            time.sleep(reply.event_delay)
                    if reply.hang_after is not None and reply.hang_after >= len(events):
                        self._hang()
                except (BrokenPipeError, ConnectionResetError):
                    fake.client_disconnected.set()

            def _hang(self) -> None:
                # Keep the stream open with SSE comments (ignored by clients) until the client
                # closes the connection, which makes a write fail.
                deadline = time.monotonic() + 30
                while not fake.released.is_set() and time.monotonic() < deadline:
                    try:
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        fake.client_disconnected.set()
                        return
                    time.sleep(0.02)

        return Handler


def split_evenly(value: str, pieces: int) -> list[str]:
    """`value` in about `pieces` fragments, as a provider streams a tool call's JSON."""
    if pieces <= 1 or len(value) <= 1:
        return [value]
    size = max(1, -(-len(value) // pieces))
    return [value[i : i + size] for i in range(0, len(value), size)]


class FakeProvider(FakeServer):
    """A model provider's API: one POST route; a request the real API would refuse gets its
    400, another route its 404, and a request with no reply scripted a 500.

    A provider names its route (`path`), how its API words an error (`error_json`), what it
    would reject in a request body (`wire_problem`), and its error types."""

    path: str
    not_found: tuple[str, str]  # (error type, message with {path})
    server_error_type: str

    def __init__(self) -> None:
        super().__init__(
            no_reply=Reply(
                status=500, json_body=self.error_json(self.server_error_type, "no scripted reply")
            ),
            validate=self._check,
        )

    @staticmethod
    def error_json(error_type: str, message: str, code: str | None = None) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def wire_problem(body: Any) -> str | None:
        raise NotImplementedError

    def _check(self, path: str, body: Any) -> Reply | None:
        if path != self.path:
            error_type, message = self.not_found
            return Reply(
                status=404, json_body=self.error_json(error_type, message.format(path=path))
            )
        problem = self.wire_problem(body)
        if problem:
            return Reply(status=400, json_body=self.error_json("invalid_request_error", problem))
        return None

    def reply_error(
        self, status: int, error_type: str, message: str, code: str | None = None
    ) -> None:
        self.enqueue(Reply(status=status, json_body=self.error_json(error_type, message, code)))
