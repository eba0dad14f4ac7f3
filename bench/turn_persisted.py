"""A persisted turn: `Glove.process_request` with ScriptedModel and DjangoStore (issue 13).

Like bench/turn_overhead.py (same histories, same compaction marker 20 messages from the
end, same untimed fresh marker + window after each request) but every write and read goes
to the database: SQLite (a temporary file) and PostgreSQL (a database this bench creates and
drops on BENCH_PG_URL's server). The model answers at once, so the time is the runtime's plus
the store's. Sizes 1k and 100k stored messages; prints JSON with p50/p99 and the
t(100k)/t(1k) ratio per backend, beside the in-memory floor (MemoryStore) of the same run.

    .venv/bin/python bench/turn_persisted.py [--requests 200] [--backend sqlite|postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal  # noqa: E402

SIZES = (1_000, 100_000)
MESSAGES_AFTER_MARKER = 20
WARMUP = 20
HOPS = 6  # DjangoStore calls in a text turn (profiled): 2 inbox reads, 2 writes, 2 reads
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"


def child(backend: str, requests: int) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return asyncio.run(run_sizes(backend, requests))


async def run_sizes(backend: str, requests: int) -> dict[str, Any]:
    from asgiref.sync import sync_to_async
    from django.db import connection, transaction
    from django.utils import timezone

    from gloveapp.conversations.models import Message as Row
    from gloveapp.conversations.models import Session
    from gloveapp.core import CompactionConfig, Glove, MemoryStore, ScriptedModel
    from gloveapp.core.types import Message
    from gloveapp.ormstore.store import DjangoStore

    def history(size: int) -> list[Message]:
        before = [
            Message(sender="user" if i % 2 == 0 else "agent", text=f"message {i} " + "lorem " * 8)
            for i in range(size - MESSAGES_AFTER_MARKER - 1)
        ]
        marker = Message(sender="user", text="[Summary]\n\n...", is_compaction=True)
        recent = [
            Message(sender="agent" if i % 2 == 0 else "user", text=f"recent {i}")
            for i in range(MESSAGES_AFTER_MARKER)
        ]
        return [*before, marker, *recent]

    def prefill(session_id: str, size: int) -> None:
        # Bulk rows straight into the table (the bench's set-up, not what it measures).
        from gloveapp.conversations import serialization

        Session.objects.create(id=session_id, key=session_id, last_seq=size)
        rows = [
            Row(session_id=session_id, seq=seq, **serialization.message_fields(message))
            for seq, message in enumerate(history(size), start=1)
        ]
        Row.objects.bulk_create(rows, batch_size=5000)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

    def agent(store) -> Glove:
        model = ScriptedModel(
            ["Hello!"] * (requests + WARMUP), record_messages=False, tokens_in=1, tokens_out=1
        )
        return Glove(
            store=store,
            model=model,
            system_prompt="You are a bench agent.",
            compaction_config=CompactionConfig("Summarize."),
        ).build()

    # Every store (both sizes, database and memory) takes its turns in rotation, request by
    # request, so a busy moment on a shared machine hits all of them alike.
    subjects = []
    for size in SIZES:
        session_id = f"bench_turn_{size}"
        await sync_to_async(prefill, thread_sensitive=True)(session_id, size)
        subjects.append((size, backend, DjangoStore(session_id)))
        memory = MemoryStore(f"memory_{size}")
        await memory.append_messages(history(size))
        subjects.append((size, "memory (floor)", memory))
    gloves = [agent(store) for _, _, store in subjects]
    samples: list[list[float]] = [[] for _ in subjects]
    window = history(MESSAGES_AFTER_MARKER + 1)
    # The floor of the thread hops alone: a text turn makes HOPS store calls, each through
    # sync_to_async(thread_sensitive=True) as Django's async ORM does; here they do nothing.
    noop = sync_to_async(lambda: None, thread_sensitive=True)
    hop_samples: list[float] = []

    def durable_write() -> None:
        # The smallest transaction that must reach the disk: one row touched, committed.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {Session._meta.db_table} SET updated_at = %s WHERE id = %s",
                [timezone.now(), f"bench_turn_{SIZES[0]}"],
            )

    commit = sync_to_async(durable_write, thread_sensitive=True)
    commit_samples: list[float] = []
    for index in range(requests + WARMUP):
        started = time.perf_counter()
        for _ in range(HOPS):
            await noop()
        if index >= WARMUP:
            hop_samples.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        for _ in range(2):
            await commit()
        if index >= WARMUP:
            commit_samples.append((time.perf_counter() - started) * 1000)
        for position, (glove, (_, _, store)) in enumerate(zip(gloves, subjects, strict=True)):
            started = time.perf_counter()
            await glove.process_request("Do you have Yirgacheffe?")
            elapsed = time.perf_counter() - started
            if index >= WARMUP:
                samples[position].append(elapsed * 1000)
            await store.append_messages(window)  # untimed: the same context every request
    measures = []
    for name, values in (
        (f"{HOPS} empty sync_to_async calls (the turn's thread hops)", hop_samples),
        ("2 one-row committed writes (the turn's two transactions, bare)", commit_samples),
    ):
        values.sort()
        measures.append(
            {
                "measure": name,
                "store": f"floor ({backend})",
                "p50_ms": round(values[len(values) // 2], 3),
                "p99_ms": round(values[int(len(values) * 0.99) - 1], 3),
            }
        )
    for (size, name, _), values in zip(subjects, samples, strict=True):
        values.sort()
        measures.append(
            {
                "measure": f"text turn, {size:,} stored",
                "store": name,
                "p50_ms": round(values[len(values) // 2], 3),
                "p99_ms": round(values[int(len(values) * 0.99) - 1], 3),
            }
        )
    return {"measures": measures}


def run_child(backend: str, database_url: str, requests: int) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": database_url, "DB_CONN_MAX_AGE": "0", "DB_POOL_SIZE": "0"}
    command = [sys.executable, __file__, "--child", backend, "--requests", str(requests)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{backend} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], action="append")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.requests)))
        return 0

    import psycopg

    measures: list[dict] = []
    for backend in args.backend or ["sqlite", "postgres"]:
        if backend == "sqlite":
            with tempfile.TemporaryDirectory(prefix="glove_turn_") as folder:
                url = f"sqlite:///{Path(folder) / 'turn.sqlite3'}"
                measures += run_child("sqlite", url, args.requests)["measures"]
            continue
        admin = os.environ.get("BENCH_PG_URL", DEFAULT_PG)
        name = f"glove_turn_{os.getpid()}"
        base = admin.rsplit("/", 1)[0]
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            measures += run_child("postgresql", f"{base}/{name}", args.requests)["measures"]
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    ratios, goals = {}, []
    for store, limit in (("sqlite", 5), ("postgresql", 8)):
        by_size = [
            m["p50_ms"]
            for m in measures
            if m["store"] == store and m["measure"].startswith("text turn")
        ]
        if len(by_size) != len(SIZES):
            continue
        growth = round(by_size[-1] / by_size[0], 2)
        ratios[f"{store}: p50 t(100k)/t(1k)"] = growth
        goals.append(
            goal(
                13,
                f"a persisted text turn (scripted model) on {store}: p50 <= {limit} ms at "
                "100k stored messages, t(100k)/t(1k) <= 1.2",
                f"{by_size[-1]} ms; {growth}",
                by_size[-1] <= limit and growth <= 1.2,
            )
        )
    print(
        json.dumps(
            {
                "benchmark": "turn_persisted",
                "machine": machine(),
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "configuration": {
                    "model": "ScriptedModel (answers at once)",
                    "marker": f"compaction marker {MESSAGES_AFTER_MARKER} messages from the end",
                    "requests": args.requests,
                },
                "measures": measures,
                "ratios": ratios,
                "goals": goals,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
