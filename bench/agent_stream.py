"""A turn started over REST -> its first streamed event, on SSE and on the websocket; and
what 1,000 open streams cost one ASGI worker, SSE beside websockets, in the same run.

Starts its own Daphne (as `make run`) with a turn worker on a fresh database. One SSE stream
(`/api/sessions/<id>/events`) and one websocket (`/ws/sessions/<id>/`) watch the session;
each sample posts `POST /api/sessions/<id>/agent/turns` and notes when each stream's first
frame of that turn (`turn.queued`) arrives, measured from just before the request was sent;
the next sample starts once the turn finished. Then 1,000 SSE streams are opened on the one
server process and its resident memory compared with before, and the same for 1,000
websockets. Prints JSON.

    .venv/bin/python bench/agent_stream.py [--samples 60] [--streams 1000]
    .venv/bin/python bench/agent_stream.py --database-url postgres://postgres@127.0.0.1:5432/x

Loopback only; bounded (each frame is awaited for at most --frame-timeout seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import resource
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import percentile  # noqa: E402
from tests.api.liveserver import LiveServer  # noqa: E402

SESSION = "bench-agent"
CONNECT_BATCH = 50  # Daphne's listen backlog is 50: connect in waves

SETUP = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token
from gloveapp.conversations.models import Session
owner = get_user_model().objects.create_user("bench-agent-owner")
Session.objects.create(id=%(session)r, key=%(session)r, owner=owner, agent_name="coffee")
client = Client()
client.force_login(owner)
token = Token.objects.create(user=owner)
print(json.dumps({"cookie": client.cookies["sessionid"].value, "token": token.key}))
"""


class Stream(asyncio.Protocol):
    """One client, as light as can be: notes when bytes naming `turn.queued` / `turn.finished`
    arrive (SSE text or unmasked websocket text frames: the JSON is the same)."""

    def __init__(self, request: bytes, opened_marker: bytes) -> None:
        self.request = request
        self.marker = opened_marker
        self.buffer = b""
        self.opened = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.queued: asyncio.Future | None = None
        self.finished: asyncio.Event = asyncio.Event()

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        received = time.perf_counter()
        if not self.opened.done():
            self.buffer += data
            head, sep, _ = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            if not head.startswith(self.marker):
                self.opened.set_exception(ConnectionError(head[:200].decode(errors="replace")))
                return
            self.buffer = b""
            self.opened.set_result(self)
            return
        if self.queued is not None and not self.queued.done() and b'"turn.queued"' in data:
            self.queued.set_result(received)
        if b'"turn.finished"' in data or b'"turn.error"' in data:
            self.finished.set()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(ConnectionError(f"closed: {exc}"))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def sse_request(port: int, cookie: str) -> bytes:
    return (
        f"GET /api/sessions/{SESSION}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Accept: text/event-stream\r\nCookie: sessionid={cookie}\r\n\r\n"
    ).encode()


def ws_request(port: int, cookie: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET /ws/sessions/{SESSION}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: http://127.0.0.1:{port}\r\nCookie: sessionid={cookie}\r\n\r\n"
    ).encode()


async def open_stream(port: int, request: bytes, marker: bytes) -> Stream:
    loop = asyncio.get_running_loop()
    _, stream = await loop.create_connection(lambda: Stream(request, marker), "127.0.0.1", port)
    return await asyncio.wait_for(stream.opened, 120)


async def open_many(port: int, count: int, request_of, marker: bytes) -> list[Stream]:
    streams: list[Stream] = []
    while len(streams) < count:
        wave = min(CONNECT_BATCH, count - len(streams))
        streams += await asyncio.gather(
            *(open_stream(port, request_of(), marker) for _ in range(wave))
        )
    return streams


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError("no Threads")


async def start_turn(port: int, token: str, n: int) -> None:
    body = json.dumps({"text": f"hello {n}"}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"POST /api/sessions/{SESSION}/agent/turns HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Token {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        + body
    )
    await writer.drain()
    status = await reader.readline()
    writer.close()
    if b" 202 " not in status:
        raise RuntimeError(f"start refused: {status!r}")


def summary(samples: list[float]) -> dict:
    return {
        "samples": len(samples),
        "p50_ms": round(statistics.median(samples), 2) if samples else None,
        "p99_ms": round(percentile(samples, 0.99), 2) if samples else None,
    }


async def run(server: LiveServer, cookie: str, token: str, args) -> dict:
    port, pid = server.port, server._process.pid
    sse = await open_stream(port, sse_request(port, cookie), b"HTTP/1.1 200")
    ws = await open_stream(port, ws_request(port, cookie), b"HTTP/1.1 101")
    latency: dict[str, list[float]] = {"sse": [], "websocket": []}
    lost = {"sse": 0, "websocket": 0}
    loop = asyncio.get_running_loop()
    for n in range(args.samples):
        for stream in (sse, ws):
            stream.queued = loop.create_future()
            stream.finished.clear()
        sent = time.perf_counter()
        await start_turn(port, token, n)
        for name, stream in (("sse", sse), ("websocket", ws)):
            try:
                arrived = await asyncio.wait_for(stream.queued, args.frame_timeout)
                latency[name].append((arrived - sent) * 1000)
            except TimeoutError:
                lost[name] += 1
        await asyncio.wait_for(sse.finished.wait(), 60)
    sse.close()
    ws.close()
    await asyncio.sleep(1)

    # Websockets first, then SSE streams beside them: both kept open, so neither reuses
    # memory the other freed.
    memory = {}
    opened: list[Stream] = []
    for name, request_of, marker in (
        ("websocket", lambda: ws_request(port, cookie), b"HTTP/1.1 101"),
        ("sse", lambda: sse_request(port, cookie), b"HTTP/1.1 200"),
    ):
        before = rss_mb(pid)
        streams = await open_many(port, args.streams, request_of, marker)
        await asyncio.sleep(2)
        after = rss_mb(pid)
        memory[name] = {
            "open": len(streams),
            "rss_before_mb": round(before, 1),
            "rss_after_mb": round(after, 1),
            "mb_per_1000": round((after - before) * 1000 / len(streams), 1),
            "threads_after": threads(pid),
        }
        opened += streams
    for stream in opened:
        stream.close()
    return {
        "first_event": {
            name: {**summary(values), "lost": lost[name]} for name, values in latency.items()
        },
        "memory": memory,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--frame-timeout", type=float, default=10.0)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 8192), hard), hard))
    started = time.monotonic()
    server = LiveServer(
        database_url=args.database_url,
        extra_env={"GLOVE_TURNS_PER_USER_PER_MINUTE": "100000", "REDIS_URL": ""},
    )
    with server:
        setup = server.manage("shell", "-c", SETUP % {"session": SESSION})
        ids = json.loads(setup.strip().splitlines()[-1])
        server.start_worker()
        results = asyncio.run(run(server, ids["cookie"], ids["token"], args))
    print(
        json.dumps(
            {
                "benchmark": "agent_stream",
                "machine": machine(),
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "configuration": {
                    "server": "daphne, one process",
                    "database": "postgresql"
                    if server.database_url.startswith("postgres")
                    else "sqlite",
                    "channel_layer": "in-memory",
                    "path": "POST …/agent/turns -> first frame of the turn (turn.queued)",
                },
                **results,
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
