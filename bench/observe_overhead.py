"""What metrics, the timeline and tracing cost: a chat turn and REST GET/POST, three ways at once.

- `today`: the tree before issue 32 (a detached checkout of `BASELINE_COMMIT`, made by this
  script and removed after; or `--baseline DIR`), on the same virtual environment;
- `off`: this tree, no OTEL endpoint (metrics in multiprocess mode and the timeline on,
  tracing not set up: the API's no-op tracer);
- `on`: this tree, tracing on as shipped (spans exported over OTLP/HTTP to a local receiver
  that accepts them): every turn traced, requests within the default budget of
  GLOVE_TRACED_REQUESTS_PER_SECOND (1 a second per process: at the bench's rate of hundreds a
  second, a few %, the rest passed over by `TraceGate` for next to nothing); `--every` adds
  `on_every_request`, every request traced, which is what a trace costs.

Each way is one long-lived child process on a SQLite file of its own (migrated and warmed up,
untimed), driven by this parent in lockstep: in every round each way runs one block of each
operation, in a rotating order, so the machine's load falls on the three alike. A chat turn is
a menu question on the demo model (posted, then two model calls and a tool call run by the turn
engine in the process); REST is Django's full stack in the process (the WSGI handler through its
test client: every middleware, the token login) for `GET /api/sessions/<id>` and
`POST /api/sessions/<id>/messages`.

What is measured is work, not waiting: the CPU time of the child's whole process over the block
(every thread: the span exporter's is flushed inside the block), per operation. Wall time on a
shared 2-core machine moves by 2x between runs of the same code; CPU time moves by a few %. Each
round gives a ratio per way (its CPU per operation / today's, same round); the figure is the
median ratio over the rounds, with its interquartile range. `--instructions` runs the children
under `valgrind --tool=callgrind` instead and counts the instructions each operation executes,
which load hardly moves (slow: a few rounds of small blocks). Under callgrind a request takes
some 50 times longer, so a budget of traces a second keeps a larger share of requests than at
full speed (5 % of the GETs against 1 %): the instruction count of `on` overstates its cost. Under callgrind a request takes
some 50 times longer, so a budget of traces a second keeps a far larger share of them than at
full speed: read `on` in CPU time, and the cost of one trace in instructions (`--every`).

The goal (issue 32): `off` and `on` each within 5 % of `today` (`floor` 1.05). Prints JSON.

    .venv/bin/python bench/observe_overhead.py [--rounds 40] [--instructions] [--profile off]
"""

from __future__ import annotations

import argparse
import contextvars
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal  # noqa: E402

FLOOR = 1.05
# The tree before issue 32: main just before the observe branch landed, with the decisions
# branch that landed beside it (so only issue 32's work differs from this tree).
BASELINE_COMMIT = "edd5730840471b96c72ae1b40fc619f4cde27db2"
WAYS = ("today", "off", "on")
# `--every`: also `on` with every request traced (GLOVE_TRACED_REQUESTS_PER_SECOND=inf): what
# one trace costs, for the record; the product's default is a budget of traces a second.
EVERY = "on_every_request"
OPS = {"turn": "chat turn", "get": "REST GET", "post": "REST POST"}
WARMUP = 20  # operations of each kind each child runs before it answers "ready"
HELPER_C = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""


# -- the child: one way, one process, blocks of operations on demand ----------------------------
class Child:
    def __init__(self, root: str) -> None:
        sys.path.insert(0, root)
        os.chdir(root)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
        import django

        django.setup()
        import asyncio

        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client
        from django.urls import reverse
        from rest_framework.authtoken.models import Token

        import gloveapp

        # Which tree this way runs (the baseline's or this one): said on stderr.
        print(f"gloveapp from {gloveapp.__file__}", file=sys.stderr, flush=True)
        # Set-up in a context of its own: migrating (and building the URL resolver's reverse
        # index) sets some thirty asgiref `Local` context variables, which a server or worker
        # process never carries into its turns (a turn worker's context holds five). In a
        # context of more than 16 variables every `ContextVar.set` clones a 32-slot node, and
        # asgiref walks every variable after each `sync_to_async` call: the turns ran up to
        # 15 % more instructions, the most in `on`, which sets the OpenTelemetry context.
        contextvars.copy_context().run(call_command, "migrate", verbosity=0)
        # The resolver's reverse index built, as a server has it after its first page (and
        # `on`'s gate builds it): in every way alike.
        contextvars.copy_context().run(reverse, "healthz")
        self.user = get_user_model().objects.create_user("bench")
        token = Token.objects.create(user=self.user).key
        self.client = Client(HTTP_AUTHORIZATION=f"Token {token}")
        self.loop = asyncio.new_event_loop()
        self.body = json.dumps({"messages": [{"sender": "user", "text": "hello"}]})
        self.rest_session = self._session()
        self.blocks = 0
        self.callgrind = None
        if os.environ.get("BENCH_CALLGRIND_HELPER"):
            import ctypes

            self.callgrind = ctypes.CDLL(os.environ["BENCH_CALLGRIND_HELPER"])

    def _session(self) -> Any:
        from gloveapp.conversations.services import session_create

        return session_create(owner=self.user, agent_name="coffee")

    @staticmethod
    def _batcher() -> Any:
        """The SDK's batching span processor's inner batcher (None without an exporter)."""
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        for processor in getattr(
            getattr(provider, "_active_span_processor", None), "_span_processors", ()
        ):
            batcher = getattr(processor, "_batch_processor", None)
            if batcher is not None:
                return batcher
        return None

    def _queued(self) -> int:
        batcher = self._batcher()
        return 0 if batcher is None else len(batcher._queue)

    def _turns(self, count: int) -> None:
        import asyncio

        from gloveapp.turns import submit
        from gloveapp.turns.engine import TurnEngine
        from gloveapp.turns.queue.tasks import enqueue_session

        session = self.turn_session

        async def run() -> None:
            engine = TurnEngine(requeue=enqueue_session, worker_id="bench")
            for index in range(count):
                await asyncio.to_thread(
                    submit.turn_submit,
                    session_id=session.pk,
                    text=f"show me the menu ({index})",
                    user_id=self.user.pk,
                )
                await engine.run_session(session.pk)
                engine._stopping = False  # run_session stops the engine it ran on: reuse it

        self.loop.run_until_complete(run())

    def _get(self, count: int) -> None:
        for _ in range(count):
            response = self.client.get(f"/api/sessions/{self.rest_session.key}")
            assert response.status_code == 200, response.content

    def _post(self, count: int) -> None:
        for _ in range(count):
            response = self.client.post(
                f"/api/sessions/{self.rest_session.key}/messages",
                self.body,
                content_type="application/json",
            )
            assert response.status_code == 200, response.content

    def run(self, op: str, count: int) -> None:
        if op == "turn":
            self.turn_session = self._session()  # a fresh chat per block: the same history
        {"turn": self._turns, "get": self._get, "post": self._post}[op](count)

    def block(self, op: str, count: int) -> dict[str, Any]:
        """`count` operations, measured. The spans they make wait in the exporter's queue
        (nothing is exported during a block): `export` measures sending them."""
        self.blocks += 1
        if op == "turn":
            self.turn_session = self._session()  # untimed
        queued = self._queued()
        # Each block starts from the same garbage collector state: what is alive (in `on`,
        # every span queued since the start, which no server keeps: its exporter sends them
        # every few seconds) is frozen out of later collections, so that a full collection
        # landing in one way's block and not another's is not read as that way's cost.
        gc.collect()
        gc.freeze()
        self._measure_start()
        {"turn": self._turns, "get": self._get, "post": self._post}[op](count)
        found = self._measure_end(f"{op}-{self.blocks}")
        return {"op": op, "count": count, "spans": self._queued() - queued, **found}

    def export(self) -> dict[str, Any]:
        """Export every queued span as the SDK does by itself under load (batches of 512,
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE's default), measured: the exporter's cost per span."""
        batcher = self._batcher()
        if batcher is None:
            return {"spans": 0}
        spans = len(batcher._queue)
        batcher._max_export_batch_size = 512
        self._measure_start()
        batcher.force_flush()
        return {"spans": spans, **self._measure_end("export")}

    def _measure_start(self) -> None:
        if self.callgrind is not None:
            self.callgrind.cg_zero()
        self._started = time.perf_counter_ns(), time.process_time_ns()

    def _measure_end(self, name: str) -> dict[str, Any]:
        wall, cpu = self._started
        cpu, wall = time.process_time_ns() - cpu, time.perf_counter_ns() - wall
        found = {"cpu_ns": cpu, "wall_ns": wall}
        if self.callgrind is not None:
            found["instructions"] = self._dumped(name)
        return found

    def _dumped(self, name: str) -> int:
        """Dump callgrind's counts since the last zero and read their total back."""
        folder = Path(os.environ["BENCH_CALLGRIND_DIR"])
        before = set(folder.iterdir())
        self.callgrind.cg_dump(name.encode())
        (dump,) = [path for path in folder.iterdir() if path not in before]
        total = 0
        for line in dump.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
                break
        dump.unlink()
        return total


def child_main(root: str) -> None:
    child = Child(root)
    for op in OPS:
        child.run(op, WARMUP)
    batcher = child._batcher()
    if batcher is not None:
        batcher.force_flush()  # the warm-up's spans: not part of any measure
    if child.callgrind is not None:
        child.callgrind.cg_start()  # counted from here: the setup ran uninstrumented
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("quit"):
            break
        if command.get("export"):
            print(json.dumps(child.export()), flush=True)
            continue
        print(json.dumps(child.block(command["op"], command["count"])), flush=True)
    child.loop.close()


def profile_main(root: str, op: str, count: int) -> None:
    """cProfile `count` operations after the warm-up: the functions that cost most."""
    import cProfile
    import pstats

    child = Child(root)
    child.run(op, WARMUP)
    profiler = cProfile.Profile()
    profiler.enable()
    child.run(op, count)
    profiler.disable()
    if os.environ.get("BENCH_PROFILE_OUT"):
        profiler.dump_stats(os.environ["BENCH_PROFILE_OUT"])
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(60)


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


def child_env(way: str, folder: Path, sink: Sink) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "PROMETHEUS_", "DATABASE_URL", "REDIS_URL"))
    }
    (folder / "prometheus").mkdir()
    env.update(
        {
            "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
            "GLOVE_MODEL": "",
            "GLOVE_TURNS_PER_USER_PER_MINUTE": "100000",
            # The turn engine's watcher looks for answers every 20 ms of wall time while a turn
            # runs: under callgrind a turn lasts some 50 times longer, so those looks, more
            # for whichever way runs slower, were up to a sixth of a turn's instructions.
            # Menu questions wait on nobody: the watcher is left asleep in every way alike.
            "GLOVE_TURN_POLL_SECONDS": "3600",
            "LOG_LEVEL": "WARNING",
            "PYTHONHASHSEED": "0",
            # As `make serve-prod` runs: metrics written to files for the scrape to add up.
            "PROMETHEUS_MULTIPROC_DIR": str(folder / "prometheus"),
        }
    )
    if way == EVERY:
        env["GLOVE_TRACED_REQUESTS_PER_SECOND"] = "inf"
    if way in ("on", EVERY):
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{sink.port}"
        # Spans wait in the queue during the blocks; `Child.export` sends and measures them.
        env["OTEL_BSP_SCHEDULE_DELAY"] = str(24 * 3600 * 1000)
        env["OTEL_BSP_MAX_QUEUE_SIZE"] = env["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "10000000"
    return env


class Way:
    """One way's child process, driven over its stdin and stdout."""

    def __init__(self, way: str, root: Path, sink: Sink, helper: Path | None) -> None:
        self.way = way
        self.folder = Path(tempfile.mkdtemp(prefix=f"glove-bench-observe-{way}-"))
        env = child_env(way, self.folder, sink)
        command = [sys.executable, str(Path(__file__).resolve()), "--child", str(root)]
        if helper is not None:
            env["BENCH_CALLGRIND_HELPER"] = str(helper)
            env["BENCH_CALLGRIND_DIR"] = str(self.folder / "callgrind")
            (self.folder / "callgrind").mkdir()
            command = [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                "--dump-instr=no",
                "--dump-line=no",
                f"--callgrind-out-file={self.folder / 'callgrind' / 'out.%p'}",
                *command,
            ]
        self.stderr = open(self.folder / "stderr", "w+")  # closed in close()
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )

    def read(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            self.stderr.seek(0)
            raise RuntimeError(f"{self.way} ended:\n{self.stderr.read()[-4000:]}")
        return json.loads(line)

    def ready(self) -> str:
        self.read()
        self.stderr.seek(0)
        said = [line for line in self.stderr.read().splitlines() if "gloveapp from" in line]
        return said[0] if said else ""

    def block(self, op: str, count: int) -> dict[str, Any]:
        return self.ask({"op": op, "count": count})

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"quit": True}) + "\n")
            self.process.stdin.flush()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def callgrind_helper(folder: Path) -> Path:
    source, built = folder / "callgrind_helper.c", folder / "callgrind_helper.so"
    source.write_text(HELPER_C)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O1", "-o", str(built), str(source)],
        check=True,
    )
    return built


def baseline_checkout(folder: Path) -> Path:
    """A detached checkout of BASELINE_COMMIT (removed by `remove_checkout`)."""
    where = folder / "today"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), BASELINE_COMMIT],
        check=True,
        capture_output=True,
    )
    return where


def remove_checkout(where: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
        capture_output=True,
    )


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, middle, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, middle, high


def summarize(
    ways: tuple[str, ...],
    blocks: dict[str, dict[str, list[dict[str, Any]]]],
    exports: dict[str, dict[str, Any]],
    unit: str,
) -> list[dict[str, Any]]:
    """One row per operation: each way's median per operation, and the median over the
    rounds of each way's ratio to today's same-round block. A way's cost per operation is
    its block's plus its share of the exporter's work (spans per operation x the measured
    cost of exporting one)."""
    rows = []
    scale, suffix = (1e-6, "ms") if unit == "cpu_ns" else (1e-3, "k_instructions")
    for op, what in OPS.items():
        per_op: dict[str, list[float]] = {}
        row: dict[str, Any] = {
            "measure": f"{what} ({'CPU' if unit == 'cpu_ns' else 'instructions'})"
        }
        for way in ways:
            mine = blocks[way][op]
            spans = sum(b["spans"] for b in mine) / sum(b["count"] for b in mine)
            exported = exports.get(way) or {}
            share = spans * exported[unit] / exported["spans"] if exported.get("spans") else 0
            per_op[way] = [b[unit] / b["count"] + share for b in mine]
            if way != "today":
                row[f"{way}_spans_per_op"] = round(spans, 2)
                row[f"{way}_export_share"] = round(share * scale, 3)
        row[f"today_{suffix}"] = round(statistics.median(per_op["today"]) * scale, 3)
        met = True
        for way in ways[1:]:
            ratios = [mine / base for mine, base in zip(per_op[way], per_op["today"], strict=True)]
            low, ratio, high = quartiles(ratios)
            row[f"{way}_{suffix}"] = round(statistics.median(per_op[way]) * scale, 3)
            row[f"{way}_ratio"] = round(ratio, 3)
            row[f"{way}_ratio_iqr"] = [round(low, 3), round(high, 3)]
            # Costs that come now and then (a garbage collection, a WAL checkpoint) in
            # total, where the median would leave them out.
            row[f"{way}_ratio_of_totals"] = round(sum(per_op[way]) / sum(per_op["today"]), 3)
            met = met and (ratio <= FLOOR or way == EVERY)
        row["floor"] = FLOOR
        row["within_floor"] = met
        rows.append(row)
    return rows


def wall_rows(
    ways: tuple[str, ...], blocks: dict[str, dict[str, list[dict[str, Any]]]]
) -> dict[str, Any]:
    """Wall time, for the record only (it is the machine's load as much as the code's)."""
    return {
        OPS[op]: {
            way: round(
                statistics.median(b["wall_ns"] / b["count"] for b in blocks[way][op]) / 1e6, 3
            )
            for way in ways
        }
        for op in OPS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--turns", type=int, default=4, help="turns per block")
    parser.add_argument("--requests", type=int, default=40, help="requests per block")
    parser.add_argument("--baseline", default=os.environ.get("BASELINE_ROOT", ""))
    parser.add_argument("--instructions", action="store_true", help="count under callgrind")
    parser.add_argument("--every", action="store_true", help=f"also the way {EVERY}")
    parser.add_argument("--profile", choices=(*WAYS, EVERY), help="cProfile one way's operations")
    parser.add_argument("--op", choices=list(OPS), default="get", help="with --profile")
    parser.add_argument("--child", default="")
    args = parser.parse_args()
    if args.child:
        child_main(args.child)
        return
    if args.instructions and args.rounds == parser.get_default("rounds"):
        args.rounds, args.turns, args.requests = 3, 3, 15

    scratch = Path(tempfile.mkdtemp(prefix="glove-bench-observe-"))
    baseline = Path(args.baseline) if args.baseline else baseline_checkout(scratch)
    sink = Sink()
    try:
        if args.profile:
            root = baseline if args.profile == "today" else ROOT
            env = child_env(args.profile, scratch, sink)
            count = args.turns * 10 if args.op == "turn" else args.requests * 10
            code = (
                "import sys; sys.path.insert(0, sys.argv[1]);"
                "from bench.observe_overhead import profile_main;"
                "profile_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))"
            )
            subprocess.run(
                [sys.executable, "-c", code, str(ROOT), str(root), args.op, str(count)],
                env=env,
                check=True,
            )
            return
        helper = callgrind_helper(scratch) if args.instructions else None
        names = (*WAYS, EVERY) if args.every else WAYS
        ways = {way: Way(way, baseline if way == "today" else ROOT, sink, helper) for way in names}
        try:
            for way in ways.values():
                print(f"  {way.way}: {way.ready()}", file=sys.stderr, flush=True)
            blocks = {way: {op: [] for op in OPS} for way in names}
            counts = {"turn": args.turns, "get": args.requests, "post": args.requests}
            started = time.monotonic()
            for number in range(args.rounds):
                # A rotating order: no way always runs first (or right after another).
                turn = number % len(names)
                order = names[turn:] + names[:turn]
                for op in OPS:
                    for way in order:
                        blocks[way][op].append(ways[way].block(op, counts[op]))
                print(
                    f"round {number + 1}/{args.rounds} ({time.monotonic() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            # What exporting the spans of every block cost (the SDK's batches of 512).
            exports = {name: way.ask({"export": True}) for name, way in ways.items()}
        finally:
            for way in ways.values():
                way.close()
        unit = "instructions" if args.instructions else "cpu_ns"
        measures = summarize(names, blocks, exports, unit)
        commit = subprocess.run(
            ["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    finally:
        if not args.baseline:
            remove_checkout(baseline)
        shutil.rmtree(scratch, ignore_errors=True)
    how = "instructions (callgrind)" if args.instructions else "CPU time of the process"
    worst = max(max(row["off_ratio"], row["on_ratio"]) for row in measures)
    print(
        json.dumps(
            {
                "benchmark": "observe_overhead",
                "machine": machine(),
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "configuration": {
                    "rounds": args.rounds,
                    "turns_per_block": args.turns,
                    "requests_per_block": args.requests,
                    "measured": how,
                    "baseline": f"{baseline.name} at {commit}",
                    "spans_exported_batches": sink.exports,
                },
                "anchor": "today: this tree before issue 32, measured in the same run",
                "measures": measures,
                "wall_ms_for_the_record": wall_rows(names, blocks),
                "goals": [
                    goal(
                        32,
                        "tracing and metrics on a chat turn and REST GET/POST, exporter on and "
                        f"off: each within 5 % of today ({how})",
                        ", ".join(
                            f"{row['measure'].split(' (')[0]} off x{row['off_ratio']} "
                            f"on x{row['on_ratio']}"
                            for row in measures
                        ),
                        worst <= FLOOR,
                    )
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
