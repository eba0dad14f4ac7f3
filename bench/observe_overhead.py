"""What metrics and tracing cost: a chat turn and REST GET/POST, three ways, in one run.

- `today`: the code without them, a checkout given by `--baseline` (default /work/main, or
  BASELINE_ROOT), on the same virtual environment;
- `off`: this tree, no OTEL endpoint (metrics recorded, tracing not set up);
- `on`: this tree, exporting every span over OTLP/HTTP to a local receiver that accepts them.

Each way runs in a fresh child process on a SQLite file of its own (migrated, untimed): a
chat turn is a menu question on the demo model (two model calls and a tool call) run by
the turn engine in the process; REST is Django's full stack in the process (the WSGI
handler through its test client: every middleware, the token login) for
`GET /api/sessions/<id>` and `POST /api/sessions/<id>/messages`. The ways alternate for
`--rounds` rounds and each figure is the best round's median (the machine is shared). The
goal: `off` and `on` within 5 % of `today` (`floor` 1.05). Prints JSON.

    .venv/bin/python bench/observe_overhead.py [--turns 150] [--requests 800] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR = 1.05
WARMUP = 20


# -- the child: one way, one process ------------------------------------------------------------
def child(root: str, turns: int, requests: int) -> dict:
    sys.path.insert(0, root)
    os.chdir(root)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()
    import asyncio

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from rest_framework.authtoken.models import Token

    import gloveapp
    from gloveapp.conversations.services import session_create
    from gloveapp.turns import services
    from gloveapp.turns.queue.tasks import enqueue_session
    from gloveapp.turns.worker import TurnEngine

    # Which tree this way runs (the baseline's or this one): said on stderr.
    print(f"gloveapp from {gloveapp.__file__}", file=sys.stderr)
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    token = Token.objects.create(user=user).key

    async def run_turns(session_id: str, count: int) -> list[float]:
        engine = TurnEngine(requeue=enqueue_session, worker_id="bench")
        took = []
        for index in range(count):
            await asyncio.to_thread(
                services.turn_submit,
                session_id=session_id,
                text=f"show me the menu ({index})",
                user_id=user.pk,
            )
            started = time.perf_counter()
            await engine.run_session(session_id)
            took.append((time.perf_counter() - started) * 1000)
            engine._stopping = False  # run_session stops the engine it ran on: reuse it
        return took

    turn_ms = []
    for _ in range(max(1, turns // 50)):
        # A fresh session every 50 turns: the history stays the same size across ways.
        session = session_create(owner=user, agent_name="coffee")
        turn_ms += asyncio.run(run_turns(session.pk, min(50, turns)))
    turn_ms = turn_ms[WARMUP:] or turn_ms

    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    session = session_create(owner=user, agent_name="coffee", session_id="bench-rest")
    get_ms, post_ms = [], []
    body = json.dumps({"messages": [{"sender": "user", "text": "hello"}]})
    for index in range(requests + WARMUP):
        started = time.perf_counter()
        response = client.get(f"/api/sessions/{session.key}")
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.content
        if index >= WARMUP:
            get_ms.append(elapsed)
        started = time.perf_counter()
        response = client.post(
            f"/api/sessions/{session.key}/messages", body, content_type="application/json"
        )
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.content
        if index >= WARMUP:
            post_ms.append(elapsed)
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush()
    return {
        "turn_ms": statistics.median(turn_ms),
        "get_ms": statistics.median(get_ms),
        "post_ms": statistics.median(post_ms),
    }


# -- the parent ----------------------------------------------------------------------------------
class Sink:
    """An OTLP/HTTP receiver that accepts and counts what it is sent."""

    def __init__(self) -> None:
        self.exports = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                sink.exports += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def run_way(way: str, root: Path, args: argparse.Namespace, sink: Sink) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"glove-bench-observe-{way}-"))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "PROMETHEUS_", "DATABASE_URL", "REDIS_URL"))
    }
    env.update(
        {
            "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
            "GLOVE_MODEL": "",
            "GLOVE_TURNS_PER_USER_PER_MINUTE": "100000",
            "LOG_LEVEL": "WARNING",
        }
    )
    if way == "on":
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{sink.port}"
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            str(root),
            "--turns",
            str(args.turns),
            "--requests",
            str(args.requests),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{way} failed:\n{done.stderr[-4000:]}")
    print(f"  {way}: {done.stderr.strip().splitlines()[0]}", file=sys.stderr, flush=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default=os.environ.get("BASELINE_ROOT", "/work/main"))
    parser.add_argument("--child", default="")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.turns, args.requests)))
        return

    baseline = Path(args.baseline)
    ways = {"today": baseline, "off": ROOT, "on": ROOT}
    sink = Sink()
    best: dict[str, dict[str, float]] = {}
    for round_number in range(args.rounds):
        for way, root in ways.items():
            print(f"round {round_number + 1}: {way}", file=sys.stderr, flush=True)
            figures = run_way(way, root, args, sink)
            kept = best.setdefault(way, figures)
            for key, value in figures.items():
                kept[key] = min(kept[key], value)
    commit = subprocess.run(
        ["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    measures = []
    for what, key in (("chat turn", "turn_ms"), ("REST GET", "get_ms"), ("REST POST", "post_ms")):
        today = best["today"][key]
        row = {"measure": what, "today_ms": round(today, 3)}
        for way in ("off", "on"):
            row[f"{way}_ms"] = round(best[way][key], 3)
            row[f"{way}_ratio"] = round(best[way][key] / today, 3)
        row["floor"] = FLOOR
        row["within_floor"] = row["off_ratio"] <= FLOOR and row["on_ratio"] <= FLOOR
        measures.append(row)
    print(
        json.dumps(
            {
                "config": {
                    "turns": args.turns,
                    "requests": args.requests,
                    "rounds": args.rounds,
                    "baseline": f"{baseline} at {commit}",
                    "spans_exported_batches": sink.exports,
                },
                "measures": measures,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
