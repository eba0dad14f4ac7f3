"""`GET /api/sessions/<id>/events` on the project's ASGI application, in the test's process
and event loop: what a client of the stream receives, without a server of its own."""

from __future__ import annotations

import asyncio
import json

from gloveapp.asgi import application

# Frames arrive within milliseconds; this only bounds how long a broken test hangs.
FRAME_TIMEOUT = 10


class SseStream:
    """One request to the stream: its status and headers, then its frames one by one."""

    def __init__(self, path: str, token: str | None = None, *, host: str = "testserver") -> None:
        headers = [(b"host", host.encode())]
        if token is not None:
            headers.append((b"authorization", f"Token {token}".encode()))
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.leave = asyncio.Event()
        self.started = asyncio.Event()
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.buffer = ""

    async def _receive(self) -> dict:
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {
                name.decode("latin-1"): value.decode("latin-1")
                for name, value in message["headers"]
            }
        else:
            await self.inbox.put(message.get("body", b"").decode())
            self.started.set()

    async def __aenter__(self) -> SseStream:
        self.task = asyncio.ensure_future(application(self.scope, self._receive, self._send))
        # The first body chunk (`retry:` for a stream, the body of a refusal) is sent once
        # the feed is registered.
        await asyncio.wait_for(self.started.wait(), FRAME_TIMEOUT)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.leave.set()
        await asyncio.wait_for(self.task, FRAME_TIMEOUT)

    async def body(self) -> str:
        return await asyncio.wait_for(self.inbox.get(), FRAME_TIMEOUT)

    async def frame(self) -> dict:
        """The next message's data (a LiveFrame), skipping comments and `retry:`."""
        while True:
            while "\n\n" not in self.buffer:
                self.buffer += await self.body()
            message, self.buffer = self.buffer.split("\n\n", 1)
            data = [line[5:].strip() for line in message.splitlines() if line.startswith("data:")]
            if data:
                return json.loads("\n".join(data))
