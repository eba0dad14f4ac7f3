"""A real SMTP server (aiosmtpd) and a local HTTP receiver, started by the tests.

A message counts as delivered when the server's 250 reply reaches the sender: a sender that
went away while the server held its message (`hold`) delivered nothing (RFC 5321's rule).
"""

from __future__ import annotations

import email
import email.policy
import http.server
import json
import socketserver
import threading
import time
from dataclasses import dataclass, field

from aiosmtpd.controller import Controller

from tests.servers import free_port


@dataclass
class Received:
    to: list[str]
    message: email.message.EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    def part(self, content_type: str) -> str:
        for part in self.message.walk():
            if part.get_content_type() == content_type:
                return part.get_content()
        raise AssertionError(f"no {content_type} part")


@dataclass
class _Handler:
    received: list[Received] = field(default_factory=list)
    hold: threading.Event | None = None  # set: hold the next message until `released`
    holding: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    async def handle_DATA(self, server, session, envelope):
        import asyncio

        if self.hold is not None and self.hold.is_set():
            self.hold.clear()
            self.holding.set()
            await asyncio.to_thread(self.released.wait)
            await asyncio.sleep(0.2)  # let a dead sender's connection close be noticed
            if session.transport is None or session.transport.is_closing():
                return "451 the sender went away"  # never reaches anyone: not delivered
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.received.append(Received(to=list(envelope.rcpt_tos), message=message))
        return "250 OK"


class SmtpServer:
    def __init__(self) -> None:
        self.handler = _Handler()
        self.port = free_port()
        self._controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> SmtpServer:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.handler.released.set()
        self._controller.stop()

    @property
    def received(self) -> list[Received]:
        return self.handler.received

    def wait_for(self, count: int, timeout: float = 60) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)


class HookReceiver:
    """An HTTP server on loopback that records POSTs and answers `statuses` in turn (then
    200)."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.posts: list[tuple[dict, bytes]] = []
        self.statuses = list(statuses or [])
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> HookReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def bodies(self) -> list[dict]:
        return [json.loads(body) for _, body in self.posts]
