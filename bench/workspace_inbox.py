"""The workspace inbox: `/api/inbox/history` latency as entries grow, and `inbox_push` over MCP.

Starts its own server (Daphne, one process, as `make run`) with a fresh database and three
users whose inboxes hold 1k, 10k and 100k entries (loaded through `import_workspace_inbox`,
111k rows in one table). It times each user's first page (`limit=100`) and a deep page
(`before=` an entry 90% of the way down) in turn, round after round, so whatever else loads
the machine weighs on every size alike. Then it times `inbox_push` through the MCP SDK's
client over streamable HTTP, and as bare JSON-RPC POSTs. Prints JSON.

Floor: history must not grow with the number of entries: p50 at 100k / p50 at 1k <= 1.5
for both pages (the (owner, ts, id) index makes every page one index range scan; EXPLAIN
ANALYZE on PostgreSQL at 100k: 0.06 ms either page). Anchor: bench/README.md.

    .venv/bin/python bench/workspace_inbox.py
    .venv/bin/python bench/workspace_inbox.py --database-url postgres://postgres@127.0.0.1:5432/glove_test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.report import goal, percentile  # noqa: E402
from tests.api.liveserver import LiveServer  # noqa: E402
from tests.inbox.workspaces.mcp_client import mcp_session  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
REQUESTS = 200
WARMUP = 20
PUSHES = 300


def write_entries(path: Path, workspace_id: str, count: int) -> list[str]:
    """`count` entries a minute apart, oldest first; returns their ids in that order."""
    ids = []
    with path.open("w") as out:
        for n in range(count):
            entry_id = str(uuid.uuid4())
            ids.append(entry_id)
            line = {
                "id": entry_id,
                "ts": 1_700_000_000_000 + n * 60_000,
                "workspaceId": workspace_id,
                "workspaceLabel": "Bench",
                "comments": f"Status check-in {n}: all green.",
            }
            out.write(json.dumps(line) + "\n")
    return ids


def summary(latencies: list[float]) -> dict:
    return {
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


async def time_histories(clients: dict[int, httpx.AsyncClient], deep: dict[int, str]) -> dict:
    """Round robin over sizes and pages; returns p50/p99 per size and page."""
    probes = [
        (size, page, params)
        for size in clients
        for page, params in (
            ("first_page", {"limit": 100}),
            ("deep_cursor", {"limit": 100, "before": deep[size]}),
        )
    ]
    latencies: dict[tuple[int, str], list[float]] = {(size, page): [] for size, page, _ in probes}
    for round_number in range(WARMUP + REQUESTS):
        for size, page, params in probes:
            started = time.perf_counter()
            response = await clients[size].get("/api/inbox/history", params=params)
            elapsed = time.perf_counter() - started
            if response.status_code != 200 or len(response.json()["entries"]) != 100:
                raise RuntimeError(f"history failed: {response.status_code} {response.text[:200]}")
            if round_number >= WARMUP:  # connections, caches and plans settle first
                latencies[(size, page)].append(elapsed)
    return {
        str(size): {
            page: summary(latencies[(size, page)]) for page in ("first_page", "deep_cursor")
        }
        for size in clients
    }


async def time_pushes(url: str, token: str) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    async with mcp_session(url, token) as session:
        started = time.perf_counter()
        for n in range(PUSHES):
            result = await session.call_tool("inbox_push", {"comments": f"push {n}"})
            if result.isError:
                raise RuntimeError(result.content[0].text)
        elapsed = time.perf_counter() - started
    sdk = round(PUSHES / elapsed, 1)
    # The same tool call as one bare JSON-RPC POST (what a stateless server receives), to
    # tell the SDK client's own cost from the server's.
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "inbox_push", "arguments": {"comments": "raw push"}},
    }
    accept = {**headers, "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=accept, timeout=30) as http:
        started = time.perf_counter()
        for _ in range(PUSHES):
            response = await http.post(url, json=call)
            if response.status_code != 200 or 'isError": true' in response.text:
                raise RuntimeError(response.text[:200])
        raw = round(PUSHES / (time.perf_counter() - started), 1)
    return {"calls": PUSHES, "sdk_client_calls_per_s": sdk, "raw_jsonrpc_calls_per_s": raw}


def create_workspace(server: LiveServer, owner: str, folder: Path) -> tuple[str, str]:
    created = server.manage(
        "create_workspace", "--label", "Bench", "--root", str(folder), "--owner", owner
    )
    workspace_id = re.search(r"^id:\s+(\S+)", created, re.M).group(1)
    return workspace_id, re.search(r"^token:\s+(\S+)", created, re.M).group(1)


async def run(server: LiveServer) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="glove-bench-ws-"))
    clients: dict[int, httpx.AsyncClient] = {}
    deep: dict[int, str] = {}
    push_target = ("", "")
    for size in SIZES:
        owner = f"bench{size}"
        token = server.token_for(owner)
        workspace_id, mcp_token = create_workspace(server, owner, folder)
        push_target = (f"{server.url}/mcp/{workspace_id}", mcp_token)
        file = folder / f"entries-{size}.jsonl"
        ids = write_entries(file, workspace_id, size)
        server.manage("import_workspace_inbox", str(file))
        deep[size] = ids[len(ids) // 10]  # oldest first: 90% of the way down
        clients[size] = httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=60
        )
    try:
        results: dict = {"history": await time_histories(clients, deep)}
    finally:
        for client in clients.values():
            await client.aclose()
    small, large = results["history"]["1000"], results["history"]["100000"]
    results["growth_100k_over_1k"] = {
        page: round(large[page]["p50_ms"] / small[page]["p50_ms"], 2)
        for page in ("first_page", "deep_cursor")
    }
    results["floor_ok"] = all(v <= 1.5 for v in results["growth_100k_over_1k"].values())
    results["inbox_push_mcp"] = await time_pushes(*push_target)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with LiveServer(database_url=args.database_url) as server:
        results = asyncio.run(run(server))
    results["database"] = "postgresql" if args.database_url else "sqlite"
    results["measures"] = [
        {
            "measure": f"GET /api/inbox/history?limit=100, {page.replace('_', ' ')}, "
            f"{int(size):,} entries",
            "p50_ms": figures[page]["p50_ms"],
            "p99_ms": figures[page]["p99_ms"],
        }
        for size, figures in results["history"].items()
        for page in ("first_page", "deep_cursor")
    ] + [
        {
            "measure": "inbox_push over MCP, one client in sequence",
            "sdk_client_calls_per_s": results["inbox_push_mcp"]["sdk_client_calls_per_s"],
            "raw_jsonrpc_calls_per_s": results["inbox_push_mcp"]["raw_jsonrpc_calls_per_s"],
        }
    ]
    growth = results["growth_100k_over_1k"]
    results["goals"] = [
        goal(
            10,
            "workspace history stays flat: p50 at 100k entries / at 1k <= 1.5",
            f"{growth['first_page']} (first page), {growth['deep_cursor']} (deep cursor)",
            results["floor_ok"],
        )
    ]
    print(json.dumps(results, indent=2))
    if not results["floor_ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
