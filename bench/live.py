"""Live-update latency: an inbox resolution in another process -> the websocket frame.

Starts its own ASGI server (Daphne, as `make run`, then uvicorn, as `make serve-prod`'s
websocket server; `--servers`) on a free port with a fresh database
and the Redis channel layer (REDIS_URL, its own Redis database), connects 1, 100 and 1,000
websocket clients as the session's owner, then resolves inbox items one at a time from a
separate worker process (`inbox.services.resolve_inbox_item`, the service the management
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
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
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
from inbox.services import resolve_inbox_item
print("ready", flush=True)
for line in sys.stdin:
    item_id = line.strip()
    resolve_inbox_item(item_id, f"sent:{time.time()!r}", resolved_by="command")
    print("ok", flush=True)
"""


class Watcher(WebSocketClientProtocol):
    """One browser tab: notes when each resolution's frame arrives."""

    arrivals: dict[str, list[float]]
    waiting: dict[str, asyncio.Event]
    expected: int

    def onOpen(self) -> None:
        self.factory.opened.set_result(self)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        received = time.time()
        frame = json.loads(payload)
        if frame.get("type") != "inbox.changed":
            return
        item = frame["payload"]["item"]
        sent = float(item["response"].split(":", 1)[1])
        samples = self.factory.state.arrivals.setdefault(item["id"], [])
        samples.append((received - sent) * 1000)
        if len(samples) == self.factory.state.expected:
            self.factory.state.waiting[item["id"]].set()

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        if not self.factory.opened.done():
            self.factory.opened.set_exception(ConnectionError(f"closed {code}: {reason}"))


class Room:
    """What the watchers share: arrivals per item, and who is still missing a frame."""

    def __init__(self) -> None:
        self.arrivals: dict[str, list[float]] = {}
        self.waiting: dict[str, asyncio.Event] = {}
        self.expected = 0


async def connect(port: int, cookie: str, state: Room) -> Watcher:
    url = f"ws://127.0.0.1:{port}/ws/sessions/{SESSION_ID}/"
    factory = WebSocketClientFactory(
        url, headers={"Cookie": f"sessionid={cookie}", "Origin": f"http://127.0.0.1:{port}"}
    )
    # A thousand handshakes queue behind each other's session lookups: allow for it.
    factory.setProtocolOptions(openHandshakeTimeout=120)
    factory.protocol = Watcher
    factory.opened = asyncio.get_running_loop().create_future()
    factory.state = state
    await asyncio.get_running_loop().create_connection(factory, "127.0.0.1", port)
    return await asyncio.wait_for(factory.opened, 30)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


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
            watcher.sendClose()
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
                    "path": "resolve_inbox_item in a worker process -> websocket frame",
                    "servers": args.servers,
                },
                "measures": measures,
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
