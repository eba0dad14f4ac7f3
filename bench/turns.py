"""Chat turns on the task queue: queueing overhead and turns per second.

One `turn_worker` engine runs in this process (as `manage.py turn_worker` runs it), taking
tasks from the configured backend: the database queue (default) or RQ
(GLOVE_TASKS_BACKEND=rq REDIS_URL=redis://...). The model is scripted and answers after
200 ms, as a provider would, so the numbers are the queue's and the worker's, not a model's.

- overhead: message posted (turn row stored, task enqueued) -> turn claimed by the worker,
  from the rows' own timestamps, one message at a time on an idle queue.
- throughput: S sessions at once, each with M messages queued; turns/s in total.

Goals (issue 12): overhead p50 <= 50 ms; 50 sessions at once >= 50 turns/s.
Anchor: a 2-core shared machine, SQLite file (or DATABASE_URL).

    .venv/bin/python bench/turns.py [--backend both|db|rq] [--messages 10]

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def setup(backend: str) -> None:
    folder = tempfile.mkdtemp(prefix="glove-bench-turns-")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{folder}/bench.sqlite3")
    os.environ["GLOVE_TASKS_BACKEND"] = backend
    os.environ.setdefault("GLOVE_TURNS_PER_USER_PER_MINUTE", "1000000")
    os.environ.setdefault("GLOVE_MAX_QUEUED_MESSAGES", "1000")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class SlowModel:
    """Answers every prompt after 200 ms with a short text."""

    name = "bench-slow"

    def set_system_prompt(self, text: str) -> None:
        pass

    async def prompt(self, messages, tools, notify, abort=None):
        from gloveapp.core.types import Message, ModelResult

        await asyncio.sleep(0.2)
        return ModelResult(messages=[Message(sender="agent", text="ok")], tokens_in=1, tokens_out=1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(backend: str, messages: int) -> dict:
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model

    from gloveapp.conversations.services import session_create
    from gloveapp.turns import runner, turn
    from gloveapp.turns.engine import TurnEngine
    from gloveapp.turns.fetch import fetcher_for_backend
    from gloveapp.turns.models import Turn

    turn.configured_model = lambda agent=None: SlowModel()  # the scripted 200 ms provider
    user = await sync_to_async(get_user_model().objects.create_user)(f"bench-{time.time()}")

    def new_session(n: int) -> str:
        return session_create(owner=user, agent_name="coffee", title=f"bench {n}").pk

    engine = TurnEngine(worker_id="bench")
    serving = asyncio.ensure_future(engine.serve(fetch=fetcher_for_backend()))
    await asyncio.sleep(0.5)

    # Overhead on an idle queue: one message at a time.
    session = await sync_to_async(new_session)(0)
    overheads = []
    for index in range(40):
        await runner.submit_message(session_id=session, text=f"hello {index}", user_id=user.pk)
        await runner.wait_until_idle(session)
        row = await Turn.objects.filter(session_id=session).alast()
        overheads.append((row.started_at - row.created_at).total_seconds() * 1000)
    overheads = overheads[5:]  # warm-up

    throughput = {}
    cpu_per_turn = {}
    for count in (1, 10, 50):
        sessions = [await sync_to_async(new_session)(n) for n in range(count)]
        started = time.perf_counter()
        cpu = time.process_time()
        for index in range(messages):
            for session_id in sessions:
                await runner.submit_message(
                    session_id=session_id, text=f"m{index}", user_id=user.pk
                )
        for session_id in sessions:
            await runner.wait_until_idle(session_id, poll=0.05)
        elapsed = time.perf_counter() - started
        throughput[str(count)] = round(count * messages / elapsed, 1)
        cpu_per_turn[str(count)] = round((time.process_time() - cpu) * 1000 / (count * messages), 1)

    await engine.stop(grace=1)
    serving.cancel()
    return {
        "backend": backend,
        "database": os.environ["DATABASE_URL"].split(":", 1)[0],
        "model_latency_ms": 200,
        "overhead_ms": {
            "p50": round(statistics.median(overheads), 1),
            "p99": round(percentile(overheads, 0.99), 1),
            "samples": len(overheads),
        },
        "turns_per_second": throughput,
        # Process CPU per turn, posting included (this process posts the messages too).
        "cpu_ms_per_turn": cpu_per_turn,
        "messages_per_session": messages,
        "goals": {"overhead_p50_ms": 50, "turns_per_second_50_sessions": 50},
    }


def both(messages: int) -> dict:
    results = {}
    for backend in ("db", "rq"):
        env = dict(os.environ)
        if backend == "rq":
            env["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/3")
        done = subprocess.run(
            [sys.executable, __file__, "--backend", backend, "--messages", str(messages)],
            env=env,
            stdout=subprocess.PIPE,
            check=True,
        )
        results[backend] = json.loads(done.stdout)
    return {"backends": results}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["both", "db", "rq"], default="both")
    parser.add_argument("--messages", type=int, default=10)
    args = parser.parse_args()
    if args.backend == "both":
        print(json.dumps(both(args.messages), indent=2))
        return
    setup(args.backend)
    print(json.dumps(asyncio.run(run(args.backend, args.messages)), indent=2))


if __name__ == "__main__":
    main()
