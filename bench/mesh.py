"""Mesh benchmarks: messages per second, send->stored latency and the blocking round trip,
per transport. Prints JSON.

- throughput: agent a calls `glove_mesh_send_message` N times (the tool's own code path,
  without a model); it ends when agent b's store holds all N items.
- send->stored latency: from the start of the tool call to the moment b's store has the item
  (`time.monotonic_ns`, which is one clock for every process on a Linux machine).
- round trip: a blocking send, b acknowledges it as soon as it is stored, until a's waiting
  item is resolved; one after another.
- in-process `adapter_level`: what glove-mesh's in-memory transport does by itself
  (adapter.send -> handler, adapter.acknowledge -> handler), no tool and no inbox.
- database (bench/lib/mesh_database.py): 4 sender processes on a fresh PostgreSQL database, the
  recipient offline, then restarted: its inbox must hold every message exactly once.

In-process runs both agents in this process. Redis runs agent b in a child process (across
processes, as deployed) against the Redis of BENCH_REDIS_URL (default
redis://127.0.0.1:6379/13). Anchor: glove-mesh's in-memory transport on this machine,
108k msgs/s and 24k round trips/s; goals: in-process within 3x, Redis >= 5,000 msgs/s with
p50 <= 3 ms.

    .venv/bin/python bench/mesh.py [--quick] [--transport inprocess|redis]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.report import goal, number  # noqa: E402
from gloveapp.core import CompactionConfig, Glove, MemoryStore, ScriptedModel  # noqa: E402
from gloveapp.core.tools import ToolContext  # noqa: E402
from mesh.core import AgentIdentity, mount_mesh, unmount_mesh  # noqa: E402

A = AgentIdentity(id="a", name="Agent A", description="sender")
B = AgentIdentity(id="b", name="Agent B", description="receiver")
MESSAGE_ID = re.compile(r"\[message id: ([^\]]+)\]")
STAMP = re.compile(r"^t=(\d+)")
# Tool calls in flight at once in the sending process (several agents, or one agent's
# parallel turns); each call still awaits its own EVALSHA.
REDIS_SENDERS = 8


def percentile(samples: list[int], p: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, int(-(-p * len(ordered) // 100)) - 1))
    return round(ordered[index] / 1e6, 3)


class TimedStore(MemoryStore):
    """b's store: notes when each message landed and, if asked, acknowledges it at once."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.latencies_ns: list[int] = []
        self.stored = 0
        self.done = asyncio.Event()
        self.expect = 0
        self.ack_with: Any = None

    async def add_inbox_item(self, item: Any) -> None:
        await super().add_inbox_item(item)
        now = time.monotonic_ns()
        stamp = STAMP.match(item.response or "")
        if stamp:
            self.latencies_ns.append(now - int(stamp.group(1)))
        self.stored += 1
        if self.ack_with is not None:
            await self.ack_with(MESSAGE_ID.search(item.request).group(1))
        if self.expect and self.stored >= self.expect:
            self.done.set()


def agent(store: Any) -> Glove:
    return Glove(
        store=store, model=ScriptedModel([]), compaction_config=CompactionConfig("summarise")
    ).build()


def tool(glove: Glove, name: str) -> Any:
    [found] = [t for t in glove.tools if t.name == name]
    return found


async def send_concurrently(glove: Glove, n: int, concurrency: int) -> None:
    share, rest = divmod(n, concurrency)
    await asyncio.gather(
        *(send_many(glove, share + (1 if i < rest else 0)) for i in range(concurrency))
    )


async def send_many(glove: Glove, n: int, *, blocking: bool = False) -> None:
    send = tool(glove, "glove_mesh_send_message")
    ctx = ToolContext("glove_mesh_send_message", None, None, glove.store)
    for _ in range(n):
        params = send.input_model.model_validate(
            {"to": "b", "content": f"t={time.monotonic_ns()}", "blocking": blocking}
        )
        result = await send.run(params, ctx)
        if result.status != "success":
            raise RuntimeError(result.message)


async def round_trips(glove: Glove, mount: Any, n: int) -> float:
    send = tool(glove, "glove_mesh_send_message")
    ctx = ToolContext("glove_mesh_send_message", None, None, glove.store)
    started = time.perf_counter()
    for _ in range(n):
        mount.arrivals.clear()
        params = send.input_model.model_validate({"to": "b", "content": "ping", "blocking": True})
        await send.run(params, ctx)
        await mount.arrivals.wait()
    return n / (time.perf_counter() - started)


def summary(n: int, seconds: float, latencies: list[int]) -> dict[str, Any]:
    return {
        "messages": n,
        "msgs_per_s": round(n / seconds, 1),
        "send_to_stored_p50_ms": percentile(latencies, 50),
        "send_to_stored_p99_ms": percentile(latencies, 99),
    }


# -- in-process -------------------------------------------------------------------------------


async def adapter_level(n: int) -> dict[str, float]:
    """glove-mesh's own layer: adapter.send to a subscribed handler, no tool, no inbox."""
    from mesh.core import MeshMessage, new_message_id
    from mesh.transports.inprocess import InProcessMeshTransport

    transport = InProcessMeshTransport()
    a, b = transport.adapter("a"), transport.adapter("b")
    await a.register(A)
    await b.register(B)
    received = 0

    async def handler(message: Any) -> None:
        nonlocal received
        received += 1

    await b.subscribe(handler)
    started = time.perf_counter()
    for _ in range(n):
        await a.send(MeshMessage(id=new_message_id("a"), from_="a", to="b", content="x"))
    sends = n / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(n // 2):
        message = MeshMessage(id=new_message_id("a"), from_="a", to="b", content="x")
        await a.send(message)
        await b.acknowledge(message.id)
    trips = (n // 2) / (time.perf_counter() - started)
    assert received == n + n // 2
    return {"msgs_per_s": round(sends, 1), "round_trips_per_s": round(trips, 1)}


async def bench_inprocess(n: int) -> dict[str, Any]:
    from mesh.transports.inprocess import InProcessMeshTransport

    transport = InProcessMeshTransport()
    a = agent(MemoryStore("a"))
    b_store = TimedStore("b")
    b = agent(b_store)
    mount_a = await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
    await mount_mesh(b, adapter=transport.adapter("b"), identity=B)
    await send_many(a, n // 10)  # warm-up
    b_store.latencies_ns.clear()
    started = time.perf_counter()
    await send_many(a, n)
    elapsed = time.perf_counter() - started
    result = summary(n, elapsed, b_store.latencies_ns)
    ack_tool = tool(b, "glove_mesh_acknowledge")
    ack_ctx = ToolContext("glove_mesh_acknowledge", None, None, b_store)

    async def ack(message_id: str) -> None:
        await ack_tool.run(ack_tool.input_model.model_validate({"message_id": message_id}), ack_ctx)

    # Acknowledge after the item is stored, not inside b's delivery call.
    b_store.ack_with = lambda message_id: _later(ack(message_id))
    result["round_trips_per_s"] = round(await round_trips(a, mount_a, max(n // 5, 100)), 1)
    await unmount_mesh(a)
    await unmount_mesh(b)
    result["adapter_level"] = await adapter_level(n)
    return result


async def _later(coroutine: Any) -> None:
    asyncio.get_running_loop().create_task(coroutine)


# -- Redis, receiver in a child process -------------------------------------------------------


async def redis_receiver(url: str, n: int, rounds: int) -> None:
    from mesh.transports.redis_pubsub import RedisMeshTransport

    transport = RedisMeshTransport(url=url)
    store = TimedStore("b")
    store.expect = n
    b = agent(store)
    mount = await mount_mesh(b, adapter=transport.adapter("b"), identity=B)
    print("ready", flush=True)
    await store.done.wait()
    latencies = list(store.latencies_ns)
    store.expect = n + rounds
    store.done.clear()
    store.ack_with = lambda message_id: _later(mount.adapter.acknowledge(message_id))
    print(json.dumps({"latencies_ns": latencies}), flush=True)
    await store.done.wait()
    await asyncio.sleep(0.5)  # let the last acks go out
    await unmount_mesh(b)
    await transport.close()


async def bench_redis(url: str, n: int) -> dict[str, Any]:
    import redis.asyncio as aioredis

    from mesh.transports.redis_pubsub import RedisMeshTransport

    raw = aioredis.Redis.from_url(url)
    await raw.delete("mesh:agents")
    await raw.aclose()
    rounds = max(n // 10, 100)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--child-redis",
        url,
        str(n),
        str(rounds),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        limit=2**24,  # the latency samples come back as one JSON line
    )
    assert (await child.stdout.readline()).strip() == b"ready"
    transport = RedisMeshTransport(url=url)
    a = agent(MemoryStore("a"))
    mount_a = await mount_mesh(a, adapter=transport.adapter("a"), identity=A)
    started = time.perf_counter()
    await send_concurrently(a, n, REDIS_SENDERS)
    line = await child.stdout.readline()  # the child answers once all n are stored
    elapsed = time.perf_counter() - started
    result = summary(n, elapsed, json.loads(line)["latencies_ns"])
    result["concurrent_sends"] = REDIS_SENDERS
    result["round_trips_per_s"] = round(await round_trips(a, mount_a, rounds), 1)
    await child.wait()
    await unmount_mesh(a)
    await transport.close()
    return result


TRANSPORTS = {
    "inprocess": "in-process (MeshNetwork), one agent sending",
    "redis": f"Redis pub/sub, across two processes, {REDIS_SENDERS} sends at once",
    "database": "database, 4 sender processes, one recipient (offline, then started)",
    "database_distinct_recipients": "database, 4 sender processes, 4 recipients",
    "database_16_agents_per_process": "database, 4 processes of 16 agents sending at once",
}


def measures_of(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key, figures in results.items():
        row = {
            "measure": TRANSPORTS.get(key, key),
            "msgs_per_s": figures["msgs_per_s"],
            "p50_ms": figures["send_to_stored_p50_ms"],
            "p99_ms": figures["send_to_stored_p99_ms"],
        }
        if "round_trips_per_s" in figures:
            row["round_trips_per_s"] = figures["round_trips_per_s"]
        after = figures.get("recipient_offline_then_restarted")
        if after is not None:
            row["delivered_once"] = f"{after['deliveries']:,} of {figures['messages']:,}"
        rows.append(row)
    return rows


def goals_of(results: dict[str, Any]) -> list[dict[str, Any]]:
    goals = []
    if (inproc := results.get("inprocess")) is not None:
        goals.append(
            goal(
                11,
                "mesh in-process within 3x of glove-mesh: >= 36k msgs/s, >= 8k round trips/s",
                f"{number(inproc['msgs_per_s'], 0)} msgs/s, "
                f"{number(inproc['round_trips_per_s'], 0)} round trips/s",
                inproc["msgs_per_s"] >= 36_000 and inproc["round_trips_per_s"] >= 8_000,
            )
        )
    if (redis := results.get("redis")) is not None:
        goals.append(
            goal(
                11,
                "mesh over Redis >= 5,000 msgs/s, send -> stored p50 <= 3 ms across processes",
                f"{number(redis['msgs_per_s'], 0)} msgs/s, p50 {redis['send_to_stored_p50_ms']} ms",
                redis["msgs_per_s"] >= 5_000 and redis["send_to_stored_p50_ms"] <= 3,
            )
        )
    if (db := results.get("database_16_agents_per_process")) is not None:
        after = db["recipient_offline_then_restarted"]
        goals.append(
            goal(
                11,
                "mesh through the database >= 1,000 msgs/s, nothing lost across a restart",
                f"{number(db['msgs_per_s'], 0)} msgs/s (16 agents sending at once per process);"
                f" {after['deliveries']:,} of {db['messages']:,} delivered once",
                db["msgs_per_s"] >= 1_000 and after["nothing_lost_nothing_doubled"],
            )
        )
    return goals


def _loop_factory():
    import uvloop

    return uvloop.new_event_loop


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--transport", choices=["inprocess", "redis", "database"], action="append")
    parser.add_argument("--child-redis", nargs=3, metavar=("URL", "N", "ROUNDS"))
    args = parser.parse_args()
    if args.child_redis:
        url, n, rounds = args.child_redis
        asyncio.run(redis_receiver(url, int(n), int(rounds)), loop_factory=_loop_factory())
        return
    n = 2_000 if args.quick else 20_000
    url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    results: dict[str, Any] = {}
    for transport in args.transport or ["inprocess", "redis", "database"]:
        if transport == "inprocess":
            results["inprocess"] = asyncio.run(bench_inprocess(n))
        elif transport == "redis":
            results["redis"] = asyncio.run(bench_redis(url, n), loop_factory=_loop_factory())
        else:
            from bench.lib.mesh_database import run as bench_database

            count = n // 10 if args.quick else 4_000
            results["database"] = bench_database(count, senders=4)
            results["database_distinct_recipients"] = bench_database(
                count, senders=4, distinct_recipients=True
            )
            # 16 agents per process sending at once (a turn worker runs many turns).
            results["database_16_agents_per_process"] = bench_database(
                count * 4, senders=4, concurrency=16
            )
    print(
        json.dumps(
            {
                "benchmark": "mesh",
                "measures": measures_of(results),
                "goals": goals_of(results),
                "python": platform.python_version(),
                "anchor": "glove-mesh in-memory: 108k msgs/s, 24k round trips/s (this machine)",
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
