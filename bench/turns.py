"""Chat turns on the task queue: queueing overhead and turns per second.

As in production: this process posts the messages (what the web servers do) and a
`manage.py turn_worker` process of its own runs the turns, taking tasks from the configured
backend: the database queue (django-tasks-db) or RQ (django-tasks-rq on Redis). The model is
scripted and answers after 200 ms, as a provider would, so the numbers are the queue's and
the worker's, not a model's. One worker process (`--workers` for more): it runs many turns at
once on one event loop.

- overhead: message posted (turn row stored, task enqueued) -> turn claimed by the worker,
  from the rows' own timestamps, one message at a time on an idle queue;
- throughput: S sessions at once, each with M messages queued; turns/s in total, and the CPU
  each turn costs the worker process (and the poster, separately).

Goals (issue 12): overhead p50 <= 50 ms; 50 sessions at once >= 50 turns/s.
Floor: the model's 200 ms; M turns of one session run one after another, so S sessions of
M messages cannot finish faster than M x 200 ms (S x 5 turns/s).
Anchor: a 2-core shared machine; PostgreSQL (BENCH_DATABASE_URL, a database this bench makes
and drops) or `--database sqlite` (a temporary file, the embedded default).

    .venv/bin/python bench/turns.py [--backend both|db|rq] [--messages 10] [--workers 1]
                                    [--database postgres|sqlite]

`both` (the default, what `make bench` runs) measures each backend in a process of its own
(the backend is chosen before Django starts); RQ uses BENCH_REDIS_URL
(default redis://127.0.0.1:6379/3).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.report import goal  # noqa: E402

MODEL_SECONDS = 0.2
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"
SESSION_COUNTS = (1, 10, 50)


class SlowModel:
    """Answers every prompt after 200 ms with a short text."""

    name = "bench-slow"

    def set_system_prompt(self, text: str) -> None:
        pass

    async def prompt(self, messages, tools, notify, abort=None):
        from gloveapp.core.types import Message, ModelResult

        await asyncio.sleep(MODEL_SECONDS)
        return ModelResult(messages=[Message(sender="agent", text="ok")], tokens_in=1, tokens_out=1)


def worker_main() -> None:
    """`manage.py turn_worker`, with the slow scripted model as the configured model."""
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from gloveapp.core.providers.registry import register_model_provider

    register_model_provider("bench-slow", lambda model="", **kwargs: SlowModel(), replace=True)
    settings.GLOVE_MODEL = "bench-slow"
    call_command("turn_worker")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_workers(count: int) -> list[subprocess.Popen]:
    workers = []
    for _ in range(count):
        worker = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            cwd=ROOT,
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            text=True,
        )
        line = worker.stdout.readline()
        if "ready" not in line:
            raise RuntimeError(f"turn_worker did not start: {line!r}")
        workers.append(worker)
    return workers


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()


async def run(backend: str, messages: int, worker_count: int) -> dict:
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model

    from gloveapp.conversations.services import session_create
    from gloveapp.turns.models import LIVE_STATUSES, Turn
    from gloveapp.turns.public import submit_message

    user = await sync_to_async(get_user_model().objects.create_user)(f"bench-{time.time()}")

    def new_session(n: int) -> str:
        return session_create(owner=user, agent_name="coffee", title=f"bench {n}").pk

    def busy(sessions: list[str]) -> bool:
        return Turn.objects.filter(session_id__in=sessions, status__in=LIVE_STATUSES).exists()

    async def wait_until_idle(sessions: list[str]) -> None:
        while await sync_to_async(busy)(sessions):  # noqa: ASYNC110 (state in the database)
            await asyncio.sleep(0.05)

    workers = start_workers(worker_count)
    try:
        # Overhead on an idle queue: one message at a time.
        session = await sync_to_async(new_session)(0)
        overheads = []
        for index in range(40):
            await submit_message(session_id=session, text=f"hello {index}", user_id=user.pk)
            await wait_until_idle([session])
            row = await Turn.objects.filter(session_id=session).alast()
            overheads.append((row.started_at - row.created_at).total_seconds() * 1000)
        overheads = overheads[5:]  # warm-up

        throughput, worker_cpu, poster_cpu = {}, {}, {}
        for count in SESSION_COUNTS:
            sessions = [await sync_to_async(new_session)(n) for n in range(count)]
            started = time.perf_counter()
            cpu = time.process_time()
            cpu_workers = sum(cpu_seconds(w.pid) for w in workers)
            for index in range(messages):
                for session_id in sessions:
                    await submit_message(session_id=session_id, text=f"m{index}", user_id=user.pk)
            posted_cpu = time.process_time() - cpu
            await wait_until_idle(sessions)
            elapsed = time.perf_counter() - started
            turns = count * messages
            throughput[str(count)] = round(turns / elapsed, 1)
            used = sum(cpu_seconds(w.pid) for w in workers) - cpu_workers
            worker_cpu[str(count)] = round(used * 1000 / turns, 1)
            poster_cpu[str(count)] = round(posted_cpu * 1000 / turns, 1)
    finally:
        stop_workers(workers)
    return {
        "backend": backend,
        "database": os.environ["DATABASE_URL"].split(":", 1)[0],
        "worker_processes": worker_count,
        "model_latency_ms": int(MODEL_SECONDS * 1000),
        "overhead_ms": {
            "p50": round(statistics.median(overheads), 1),
            "p99": round(percentile(overheads, 0.99), 1),
            "samples": len(overheads),
        },
        "turns_per_second": throughput,
        # CPU of the worker process(es) per turn, and what posting one message cost here.
        "worker_cpu_ms_per_turn": worker_cpu,
        "poster_cpu_ms_per_turn": poster_cpu,
        "messages_per_session": messages,
        "floor_turns_per_second": {
            str(count): round(count / MODEL_SECONDS, 1) for count in SESSION_COUNTS
        },
    }


def prepare_database(database: str) -> tuple[str, str | None]:
    """A fresh database for this run: its URL, and the PostgreSQL one to drop afterwards."""
    if database == "sqlite":
        folder = tempfile.mkdtemp(prefix="glove-bench-turns-")
        return f"sqlite:///{folder}/bench.sqlite3", None
    import psycopg

    admin = os.environ.get("BENCH_PG_URL", DEFAULT_PG)
    name = f"glove_bench_turns_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{admin.rsplit('/', 1)[0]}/{name}", name


def drop_database(name: str | None) -> None:
    if name is None:
        return
    import psycopg

    with psycopg.connect(os.environ.get("BENCH_PG_URL", DEFAULT_PG), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


BACKENDS = {"db": "database queue (django-tasks-db)", "rq": "RQ on Redis (django-tasks-rq)"}


def both(messages: int, workers: int, database: str) -> dict:
    results = {}
    for backend in ("db", "rq"):
        env = dict(os.environ)
        if backend == "rq":
            env["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/3")
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--backend",
                backend,
                "--messages",
                str(messages),
                "--workers",
                str(workers),
                "--database",
                database,
            ],
            env=env,
            stdout=subprocess.PIPE,
            check=True,
        )
        results[backend] = json.loads(done.stdout)
    return {
        "benchmark": "turns",
        "measures": [
            {
                "measure": BACKENDS[backend],
                "overhead_p50_ms": figures["overhead_ms"]["p50"],
                "overhead_p99_ms": figures["overhead_ms"]["p99"],
                **{
                    f"turns_per_s_{count}_sessions": value
                    for count, value in figures["turns_per_second"].items()
                },
                "worker_cpu_ms_per_turn": figures["worker_cpu_ms_per_turn"]["50"],
                "poster_cpu_ms_per_message": figures["poster_cpu_ms_per_turn"]["50"],
            }
            for backend, figures in results.items()
        ],
        "goals": [
            goal(
                12,
                f"turns on the {BACKENDS[backend]}: queueing overhead p50 <= 50 ms; "
                ">= 50 turns/s with 50 sessions at once (model answers after 200 ms), "
                f"{workers} worker process",
                f"{figures['overhead_ms']['p50']} ms; "
                f"{figures['turns_per_second']['50']} turns/s "
                f"({figures['worker_cpu_ms_per_turn']['50']} ms of the worker's CPU per turn)",
                figures["overhead_ms"]["p50"] <= 50 and figures["turns_per_second"]["50"] >= 50,
            )
            for backend, figures in results.items()
        ],
        "configuration": {"database": database, "worker_processes": workers},
        "backends": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["both", "db", "rq"], default="both")
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main()
        return
    if args.backend == "both":
        print(json.dumps(both(args.messages, args.workers, args.database), indent=2))
        return
    url, made = prepare_database(args.database)
    os.environ["DATABASE_URL"] = url
    os.environ["GLOVE_TASKS_BACKEND"] = args.backend
    os.environ.setdefault("GLOVE_TURNS_PER_USER_PER_MINUTE", "1000000")
    os.environ.setdefault("GLOVE_MAX_QUEUED_MESSAGES", "1000")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        result = asyncio.run(run(args.backend, args.messages, args.workers))
        from django.db import connections

        connections.close_all()
    finally:
        drop_database(made)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
