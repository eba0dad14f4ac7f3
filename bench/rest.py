"""Throughput and latency of the REST remote store's hottest routes.

Starts its own server (Daphne, one process, as `make run`) on a free port with a fresh
database, then drives `GET /api/sessions/<id>/messages` (a 20-message history) and
`POST /api/sessions/<id>/messages` (one message per request) at 1, 8 and 32 concurrent
clients, and prints JSON: requests/s and p50/p99 latency in milliseconds.

    .venv/bin/python bench/rest.py                      # SQLite file
    .venv/bin/python bench/rest.py --database-url postgres://postgres@127.0.0.1:5432/glove_test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.api.liveserver import LiveServer  # noqa: E402

CONCURRENCY = (1, 8, 32)
HISTORY = 20


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[index]


async def drive(
    client: httpx.AsyncClient, method: str, url: str, body: dict | None, total: int, workers: int
) -> dict:
    latencies: list[float] = []
    errors = 0
    remaining = total

    async def worker() -> None:
        nonlocal remaining, errors
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            response = await client.request(method, url, json=body)
            latencies.append(time.perf_counter() - started)
            if response.status_code >= 400:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    elapsed = time.perf_counter() - started
    return {
        "concurrency": workers,
        "requests": len(latencies),
        "errors": errors,
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


async def run(server: LiveServer, token: str, requests: int) -> list[dict]:
    headers = {"Authorization": f"Token {token}"}
    limits = httpx.Limits(max_connections=max(CONCURRENCY), max_keepalive_connections=64)
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, limits=limits, timeout=60
    ) as client:
        for session_id in ("bench_read", "bench_write"):
            created = await client.post("/api/sessions", json={"sessionId": session_id})
            created.raise_for_status()
        history = [
            {"sender": "user" if i % 2 == 0 else "agent", "text": f"message {i} " + "x" * 200}
            for i in range(HISTORY)
        ]
        seeded = await client.post("/api/sessions/bench_read/messages", json={"messages": history})
        seeded.raise_for_status()

        read_url = "/api/sessions/bench_read/messages"
        write_url = "/api/sessions/bench_write/messages"
        one_message = {"messages": [{"sender": "user", "text": "A flat white, please."}]}
        # Warm up connections, the token lookup and Django's import paths.
        await drive(client, "GET", read_url, None, 20, 4)

        results = []
        for workers in CONCURRENCY:
            for name, method, url, body in (
                ("GET messages", "GET", read_url, None),
                ("POST messages", "POST", write_url, one_message),
            ):
                result = await drive(client, method, url, body, requests, workers)
                results.append({"route": name, **result})
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per measurement")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args()

    with LiveServer(database_url=args.database_url) as server:
        token = server.token_for("bench")
        results = asyncio.run(run(server, token, args.requests))
        vendor = "postgresql" if server.database_url.startswith("postgres") else "sqlite"
    print(
        json.dumps(
            {
                "benchmark": "rest",
                "server": "daphne, 1 process, DEBUG=0",
                "database": vendor,
                "get_history_messages": HISTORY,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
