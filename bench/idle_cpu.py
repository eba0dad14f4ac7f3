"""An idle `make run`: the CPU its processes burn doing nothing, and post -> turn start (issue 31).

For each tree (this one, and with `--before PATH` a worktree of `main`, the "before" of the
same run) this starts exactly what `make run` starts, on a fresh SQLite file: Daphne, the
turn worker and the roastery mesh peer (`run_agent roastery`, MESH_TRANSPORT=database,
GLOVE_CHAT_MESH=true), after `migrate` and `setup_demo`. Once they are up and settled:

- idle CPU: each process's user + system time (/proc/<pid>/stat) over `--seconds` (60)
  with nothing happening, as a percentage of one core;
- post -> turn start: a message stored the way the web process stores it
  (`turns.public.submit_message`, in a process of its own) after 2 s of quiet each time,
  and the turn's `started_at - created_at` (the rows' own timestamps), p50 and max.

Goal (issue 31): the whole idle topology under 1% of a core, post -> turn start no slower
than before.

    .venv/bin/python bench/idle_cpu.py [--seconds 60] [--samples 10] [--before /tmp/glove-main]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETTLE_SECONDS = 8.0

SUBMIT = """
import asyncio, json, os, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
import django
django.setup()
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from gloveapp.conversations.services import session_create
from gloveapp.turns.models import Turn
from gloveapp.turns.public import submit_message

async def main(samples, gap):
    user = await sync_to_async(get_user_model().objects.create_user)(f"idle-{time.time()}")
    session = (await sync_to_async(session_create)(owner=user, agent_name="coffee", title="b")).pk
    waits = []
    for index in range(samples):
        await asyncio.sleep(gap)
        await submit_message(session_id=session, text="hello", user_id=user.pk)
        while True:
            turn = await Turn.objects.filter(session_id=session).order_by("-id").afirst()
            if turn.status not in ("queued", "running"):
                break
            await asyncio.sleep(0.01)
        waits.append((turn.started_at - turn.created_at).total_seconds() * 1000)
    print(json.dumps(waits))

asyncio.run(main(int(sys.argv[1]), float(sys.argv[2])))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def measure(tree: Path, seconds: float, samples: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="glove-idle-"))
    port = free_port()
    python = sys.executable
    env = dict(
        os.environ,
        DATABASE_URL=f"sqlite:///{folder}/db.sqlite3",
        PYTHONPATH=str(tree),
        DEBUG="true",
        MESH_TRANSPORT="database",
        GLOVE_CHAT_MESH="true",
        HOST="127.0.0.1",
        PORT=str(port),
        GLOVE_TASKS_BACKEND="db",
    )
    for name in ("REDIS_URL", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)

    def manage(*args: str) -> None:
        subprocess.run(
            [python, "manage.py", *args], cwd=tree, env=env, check=True, capture_output=True
        )

    manage("migrate", "--noinput")
    manage("setup_demo")
    daphne = str(Path(python).with_name("daphne"))
    commands = {
        "roastery peer": [
            python, "manage.py", "run_agent", "roastery", "--mesh-id", "roastery",
            "--capability", "stock",
        ],
        "turn worker": [python, "manage.py", "turn_worker"],
        "daphne": [daphne, "-b", "127.0.0.1", "-p", str(port), "gloveapp.asgi:application"],
    }  # fmt: skip
    processes = {
        name: subprocess.Popen(
            command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for name, command in commands.items()
    }
    try:
        wait_for_port(port)
        time.sleep(SETTLE_SECONDS)
        before = {name: cpu_seconds(p.pid) for name, p in processes.items()}
        started = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        used = {name: cpu_seconds(p.pid) - before[name] for name, p in processes.items()}
        cpu = {name: round(100 * value / elapsed, 2) for name, value in used.items()}
        done = subprocess.run(
            [python, "-c", SUBMIT, str(samples), "2.0"],
            cwd=tree,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        waits = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        for process in processes.values():
            process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "tree": str(tree),
        "idle_cpu_percent_of_a_core": {**cpu, "total": round(sum(cpu.values()), 2)},
        "post_to_turn_start_ms": {
            "p50": round(statistics.median(waits), 1),
            "max": round(max(waits), 1),
            "samples": len(waits),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--before", type=Path, help="a worktree of main: the 'before' tree")
    args = parser.parse_args()
    trees = {"after": ROOT}
    if args.before:
        trees = {"before": args.before.resolve(), **trees}
    results = {label: measure(tree, args.seconds, args.samples) for label, tree in trees.items()}
    after = results["after"]
    print(
        json.dumps(
            {
                "bench": "idle_cpu",
                **results,
                "goal": {
                    "idle topology < 1% of a core": after["idle_cpu_percent_of_a_core"]["total"]
                    < 1.0,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
