"""Live-update latency: an inbox resolution in another process -> the websocket frame.

Starts its own ASGI server (Daphne, as `make run`, then uvicorn, as `make serve-prod`'s
websocket server; `--servers`) on a free port with a fresh database
and the Redis channel layer (REDIS_URL, its own Redis database), connects 1, 100 and 1,000
websocket clients as the session's owner, then resolves inbox items one at a time from a
separate worker process (`inbox.services.inbox_item_resolve`, the service the management
command calls). Each response carries the worker's clock just before the call; each client
notes when the frame arrives. Prints JSON: p50/p99 latency in milliseconds and lost events
per level, and the server's resident memory with 1,000 clients connected.

    .venv/bin/python bench/live.py                      # SQLite file
    .venv/bin/python bench/live.py --database-url postgres://postgres@127.0.0.1:5432/glove_test

Loopback only; bounded (each frame is awaited for at most --frame-timeout seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal, percentile  # noqa: E402
from tests.api.liveserver import PYTHON, LiveServer  # noqa: E402

LEVELS = ((1, 200), (100, 60), (1000, 30))  # (connected clients, resolutions measured)
CONNECT_BATCH = 50  # Daphne's listen backlog is 50: connect in waves, not all at once
SESSION_ID = "bench-live"

SETUP = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from gloveapp.conversations.models import Session
from inbox.models import InboxItem
owner = get_user_model().objects.create_user("bench-owner")
session = Session.objects.create(id=%(session)r, key=%(session)r, owner=owner, title="bench")
InboxItem.objects.bulk_create(
    InboxItem(id=f"inbox_bench_{n}", key=f"inbox_bench_{n}", session=session, tag="bench",
              request="?",
              created_at=timezone.now())
    for n in range(%(items)d)
)
client = Client()
client.force_login(owner)
print(json.dumps({"cookie": client.cookies["sessionid"].value}))
"""

# The separate process: reads item ids on stdin, resolves each, answers "ok".
WORKER = """
import sys, time, django
django.setup()
from inbox.services import inbox_item_resolve
print("ready", flush=True)
for line in sys.stdin:
    item_id = line.strip()
    inbox_item_resolve(item_id=item_id, response=f"sent:{time.time()!r}", resolved_by="command")
    print("ok", flush=True)
"""


class Room:
    """What the watchers share: arrivals per item, and who is still missing a frame."""

    def __init__(self) -> None:
        self.arrivals: dict[str, list[float]] = {}
        self.waiting: dict[str, asyncio.Event] = {}
        self.expected = 0


# The item's id and the worker's clock, found in an `inbox.changed` frame's JSON text.
_ITEM = re.compile(rb'"id": "(inbox_bench_[0-9]+)"')
_SENT = re.compile(rb'"response": "sent:([0-9.]+)"')


class Watcher(asyncio.Protocol):
    """One browser tab, as light as a client can be: a thousand of them share this process
    with the load generator, and a full websocket client (autobahn: ~40 µs of Python per
    frame) made the client's own queue the larger part of the 1,000-socket latency. It
    notes a frame's arrival when its bytes arrive, then finds the item with two regexes;
    server frames are unmasked, and only text frames come."""

    def __init__(self, room: Room, request: bytes) -> None:
        self.room = room
        self.request = request
        self.buffer = b""
        self.opened = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        received = time.time()
        self.buffer += data
        if not self.opened.done():
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            if not head.startswith(b"HTTP/1.1 101"):
                self.opened.set_exception(ConnectionError(head.decode(errors="replace")))
                return
            self.buffer = rest
            self.opened.set_result(self)
        while len(self.buffer) >= 2:
            length, start = self.buffer[1] & 0x7F, 2
            if length == 126:
                length, start = int.from_bytes(self.buffer[2:4]), 4
            elif length == 127:
                length, start = int.from_bytes(self.buffer[2:10]), 10
            if len(self.buffer) < start + length:
                return
            payload = self.buffer[start : start + length]
            self.buffer = self.buffer[start + length :]
            self.frame(payload, received)

    def frame(self, payload: bytes, received: float) -> None:
        item, sent = _ITEM.search(payload), _SENT.search(payload)
        if item is None or sent is None or b'"type": "inbox.changed"' not in payload:
            return
        item_id = item[1].decode()
        samples = self.room.arrivals.setdefault(item_id, [])
        samples.append((received - float(sent[1])) * 1000)
        if len(samples) == self.room.expected:
            self.room.waiting[item_id].set()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(ConnectionError(f"closed: {exc}"))

    def close(self) -> None:
        if self.transport is not None:
            # A masked close frame (code 1000), as a client must send.
            mask = os.urandom(4)
            body = bytes(b ^ mask[i % 4] for i, b in enumerate((1000).to_bytes(2)))
            self.transport.write(bytes([0x88, 0x80 | len(body)]) + mask + body)
            self.transport.close()


async def connect(port: int, cookie: str, room: Room) -> Watcher:
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /ws/sessions/{SESSION_ID}/ HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: http://127.0.0.1:{port}\r\nCookie: sessionid={cookie}\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    _, watcher = await loop.create_connection(lambda: Watcher(room, request), "127.0.0.1", port)
    # A thousand handshakes queue behind each other's session lookups: allow for it.
    return await asyncio.wait_for(watcher.opened, 120)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


async def run(server: LiveServer, cookie: str, frame_timeout: float) -> dict:
    worker = await asyncio.create_subprocess_exec(
        PYTHON,
        "-c",
        WORKER,
        cwd=ROOT,
        env=server.env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert (await asyncio.wait_for(worker.stdout.readline(), 60)).strip() == b"ready"
        state, watchers, results = Room(), [], {}
        next_item = 0
        for clients, resolutions in LEVELS:
            while len(watchers) < clients:
                wave = min(CONNECT_BATCH, clients - len(watchers))
                watchers += await asyncio.gather(
                    *(connect(server.port, cookie, state) for _ in range(wave))
                )
            state.expected = clients
            samples: list[float] = []
            lost = 0
            for _ in range(resolutions):
                item_id = f"inbox_bench_{next_item}"
                next_item += 1
                state.waiting[item_id] = asyncio.Event()
                worker.stdin.write(f"{item_id}\n".encode())
                await worker.stdin.drain()
                assert (await asyncio.wait_for(worker.stdout.readline(), 30)).strip() == b"ok"
                try:
                    await asyncio.wait_for(state.waiting[item_id].wait(), frame_timeout)
                except TimeoutError:
                    pass
                arrived = state.arrivals.get(item_id, [])
                samples += arrived
                lost += clients - len(arrived)
            results[str(clients)] = {
                "events": resolutions,
                "frames": len(samples),
                "p50_ms": round(statistics.median(samples), 2) if samples else None,
                "p99_ms": round(percentile(samples, 0.99), 2) if samples else None,
                "lost_events": lost,
            }
        results["server_rss_mb_at_1000_clients"] = rss_mb(server._process.pid)
        for watcher in watchers:
            watcher.close()
        return results
    finally:
        if worker.returncode is None:
            worker.stdin.close()
            try:
                await asyncio.wait_for(worker.wait(), 10)
            except TimeoutError:
                worker.kill()


def redis_reachable(url: str) -> bool:
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port or 6379)), timeout=1):
            return True
    except OSError:
        return False


def goals_of(measures: list[dict]) -> list[dict]:
    """Issue 13's goal, judged on the production topology's websocket server (uvicorn)."""
    row = next(
        (m for m in measures if m["server"] == "uvicorn" and m["measure"] == "1000 sockets"), None
    )
    if row is None or row["p50_ms"] is None:
        return []
    return [
        goal(
            13,
            "1,000 websocket clients: resolved in another process -> frame p50 <= 20 ms, "
            "p99 <= 60 ms, 0 lost",
            f"p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, {row['lost_events']} lost",
            row["p50_ms"] <= 20 and row["p99_ms"] <= 60 and row["lost_events"] == 0,
        )
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument(
        "--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6")
    )
    parser.add_argument("--frame-timeout", type=float, default=10.0)
    parser.add_argument("--servers", default="daphne,uvicorn", help="ASGI servers to compare")
    args = parser.parse_args()
    if not redis_reachable(args.redis_url):
        print(json.dumps({"error": f"Redis not reachable at {args.redis_url}"}))
        return 1
    # 1,000 sockets on each side of loopback, plus the database and Redis.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 8192), hard), hard))
    subprocess.run(["redis-cli", "-u", args.redis_url, "flushdb"], capture_output=True, check=False)

    items = sum(resolutions for _, resolutions in LEVELS)
    measures: list[dict] = []
    database = "sqlite"
    started = time.monotonic()
    # Each ASGI server in turn on its own fresh database, same load (issue 13: the faster
    # one serves the production topology's websockets).
    for name in [n.strip() for n in args.servers.split(",") if n.strip()]:
        subprocess.run(
            ["redis-cli", "-u", args.redis_url, "flushdb"], capture_output=True, check=False
        )
        server = LiveServer(
            database_url=args.database_url, extra_env={"REDIS_URL": args.redis_url}, server=name
        )
        with server:
            setup = server.manage("shell", "-c", SETUP % {"session": SESSION_ID, "items": items})
            cookie = json.loads(setup.strip().splitlines()[-1])["cookie"]
            results = asyncio.run(run(server, cookie, args.frame_timeout))
        database = "postgresql" if server.database_url.startswith("postgres") else "sqlite"
        for clients, figures in results.items():
            if clients.isdigit():
                measures.append({"measure": f"{clients} sockets", "server": name, **figures})
        measures.append(
            {
                "measure": "server RSS at 1,000 sockets (MB)",
                "server": name,
                "value": results["server_rss_mb_at_1000_clients"],
            }
        )
    print(
        json.dumps(
            {
                "benchmark": "live",
                "machine": machine(),
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "configuration": {
                    "channel_layer": "redis",
                    "database": database,
                    "path": "inbox_item_resolve in a worker process -> websocket frame",
                    "servers": args.servers,
                },
                "measures": measures,
                "goals": goals_of(measures),
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
