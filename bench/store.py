"""DjangoStore micro-benchmarks on SQLite and PostgreSQL. Prints JSON.

- append: `append_messages` of one message, and of a turn's two, on a growing session.
- context read: `get_context_messages` on sessions of 1k, 10k and 100k messages whose last
  compaction marker is 20 messages from the end (so the context is 21 messages), beside
  `get_messages` of the whole history for comparison. The context read should not grow with
  the history (spec Decision 4: one probe of the partial compaction index, one range scan).
- resolve+consume: `inbox_item_resolve` (the conditional UPDATE every resolver shares) and
  the store's atomic `consume_resolved_inbox_items`.

Each backend runs in its own child process against a database it creates and drops: a
temporary SQLite file, and `glove_bench_<pid>` on the PostgreSQL server of BENCH_PG_URL
(default postgres://postgres@127.0.0.1:5432/postgres, the maintenance database it connects to).
Latencies are per awaited store call, through `sync_to_async` as the agent loop sees them.

    .venv/bin/python bench/store.py [--quick] [--backend sqlite|postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"


def stats(samples_ns: list[int]) -> dict[str, Any]:
    ordered = sorted(samples_ns)
    n = len(ordered)
    total = sum(ordered)

    def q(p: float) -> float:
        return ordered[min(n - 1, max(0, int(-(-p * n // 100)) - 1))] / 1e3

    return {
        "calls": n,
        "total_ms": round(total / 1e6, 3),
        "ops_per_s": round(n / total * 1e9, 1),
        "mean_us": round(total / n / 1e3, 1),
        "p50_us": round(q(50), 1),
        "p99_us": round(q(99), 1),
        "max_us": round(ordered[-1] / 1e3, 1),
    }


# -- the child: one backend ------------------------------------------------------------------


def run_backend(quick: bool) -> dict[str, Any]:
    import asyncio

    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    django.setup()

    from django.core.management import call_command
    from django.db import connection

    from gloveapp.conversations import services
    from gloveapp.core.types import InboxItem, Message
    from gloveapp.ormstore.store import DjangoStore
    from inbox.services import inbox_item_add, inbox_item_resolve

    call_command("migrate", verbosity=0)
    results: list[dict[str, Any]] = []
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    append_calls = 100 if quick else 500
    read_calls = {1_000: 200, 10_000: 200, 100_000: 200}
    full_calls = {1_000: 50, 10_000: 10, 100_000: 3}
    inbox_calls = 50 if quick else 300

    def turn(n: int) -> list[Message]:
        return [
            Message(sender="user", text=f"Do you have bag #{n} of Yirgacheffe?"),
            Message(sender="agent", text=f"Bag #{n} is out of stock; I can watch for it."),
        ]

    async def timed(n: int, call) -> list[int]:
        for i in range(min(10, n)):  # warm-up
            await call(i)
        samples = []
        for i in range(n):
            start = time.perf_counter_ns()
            await call(i)
            samples.append(time.perf_counter_ns() - start)
        return samples

    # append
    async def appends() -> None:
        store = DjangoStore("bench_append")
        one = await timed(append_calls, lambda i: store.append_messages(turn(i)[:1]))
        results.append(
            {"name": "DjangoStore.append_messages", "params": {"batch_size": 1}, **stats(one)}
        )
        two = await timed(append_calls, lambda i: store.append_messages(turn(i)))
        results.append(
            {"name": "DjangoStore.append_messages", "params": {"batch_size": 2}, **stats(two)}
        )

    asyncio.run(appends())

    # context read
    for size in sizes:
        session_id = f"bench_history_{size}"
        started = time.perf_counter()
        batch = 1_000
        for offset in range(0, size, batch):
            messages = [
                Message(sender="user" if n % 2 == 0 else "agent", text=f"message {n} " + "x" * 80)
                for n in range(offset, min(size, offset + batch))
            ]
            for n, message in zip(range(offset, offset + batch), messages, strict=False):
                message.is_compaction = n == size - 21
            services.messages_append(session_id=session_id, messages=messages)
        fill_s = time.perf_counter() - started

        async def reads(session_id: str = session_id, size: int = size) -> None:
            store = DjangoStore(session_id)
            context = await store.get_context_messages()
            assert len(context) == 21 and context[0].is_compaction, len(context)
            samples = await timed(read_calls[size], lambda i: store.get_context_messages())
            results.append(
                {
                    "name": "DjangoStore.get_context_messages",
                    "params": {"history": size, "marker_from_end": 21},
                    "returned_messages": len(context),
                    **stats(samples),
                }
            )
            samples = await timed(full_calls[size], lambda i: store.get_messages())
            results.append(
                {
                    "name": "DjangoStore.get_messages",
                    "params": {"history": size},
                    "returned_messages": size,
                    **stats(samples),
                }
            )

        asyncio.run(reads())
        results.append(
            {
                "name": "services.messages_append (fill)",
                "params": {"history": size, "batch_size": batch},
                "total_s": round(fill_s, 3),
                "messages_per_s": round(size / fill_s, 1),
            }
        )

    # resolve + consume
    for n in range(inbox_calls):
        inbox_item_add(
            session_id="bench_inbox",
            item=InboxItem(id=f"inbox_bench_{n}", tag="restock_watch", request=f"watch {n}"),
        )

    async def inbox() -> None:
        from asgiref.sync import sync_to_async

        store = DjangoStore("bench_inbox")
        resolve = sync_to_async(inbox_item_resolve)
        resolve_ns, consume_ns = [], []
        for n in range(inbox_calls):
            start = time.perf_counter_ns()
            await resolve(
                item_id=f"inbox_bench_{n}", response="Back in stock", resolved_by="command"
            )
            middle = time.perf_counter_ns()
            taken = await store.consume_resolved_inbox_items()
            end = time.perf_counter_ns()
            assert [i.id for i in taken] == [f"inbox_bench_{n}"]
            resolve_ns.append(middle - start)
            consume_ns.append(end - middle)
        empty = await timed(inbox_calls, lambda i: store.consume_resolved_inbox_items())
        results.append(
            {"name": "inbox.services.inbox_item_resolve", "params": {}, **stats(resolve_ns)}
        )
        results.append(
            {
                "name": "DjangoStore.consume_resolved_inbox_items",
                "params": {"resolved": 1},
                **stats(consume_ns),
            }
        )
        results.append(
            {
                "name": "DjangoStore.consume_resolved_inbox_items",
                "params": {"resolved": 0},
                **stats(empty),
            }
        )
        both = [a + b for a, b in zip(resolve_ns, consume_ns, strict=True)]
        results.append({"name": "resolve + consume", "params": {}, **stats(both)})

    asyncio.run(inbox())
    return {
        "vendor": connection.vendor,
        "server_version": _server_version(connection),
        "results": results,
    }


def _server_version(connection: Any) -> str:
    if connection.vendor == "sqlite":
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return f"PostgreSQL {cursor.fetchone()[0]}"


# -- the parent: databases in, JSON out ------------------------------------------------------


def child(backend: str, database_url: str, quick: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", backend] + (["--quick"] if quick else [])
    env = {**os.environ, "DATABASE_URL": database_url, "DB_CONN_MAX_AGE": "0"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{backend} benchmark failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def bench_sqlite(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="glove_bench_") as folder:
        return child("sqlite", f"sqlite:///{Path(folder) / 'bench.sqlite3'}", quick)


def bench_postgres(quick: bool) -> dict[str, Any]:
    import psycopg

    admin_url = os.environ.get("BENCH_PG_URL", DEFAULT_PG)
    name = f"glove_bench_{os.getpid()}"
    parts = urlsplit(admin_url)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        return child("postgres", urlunsplit(parts._replace(path=f"/{name}")), quick)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _label(row: dict[str, Any]) -> str:
    params = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in row.get("params", {}).items())
    return f"{row['name']} ({params})" if params else row["name"]


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    if "p50_us" in row:
        return {"p50_us": row["p50_us"], "p99_us": row["p99_us"], "ops_per_s": row["ops_per_s"]}
    return {"messages_per_s": row["messages_per_s"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], action="append")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_backend(args.quick)))
        return 0

    started = time.perf_counter()
    report: dict[str, Any] = {
        "generated_by": "bench/store.py",
        "quick": args.quick,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "units": "latency in microseconds per awaited call; ops_per_s = calls / measured time",
        "backends": {},
    }
    failed = False
    for backend in args.backend or ["sqlite", "postgres"]:
        try:
            runner = bench_sqlite if backend == "sqlite" else bench_postgres
            report["backends"][backend] = runner(args.quick)
        except Exception as exc:  # report the other backend's numbers all the same
            report["backends"][backend] = {"error": str(exc)}
            failed = True
    report["wall_s"] = round(time.perf_counter() - started, 2)
    report["measures"] = [
        {"measure": _label(row), "store": backend, **_figures(row)}
        for backend, figures in report["backends"].items()
        for row in figures.get("results", [])
    ]
    print(json.dumps(report, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
