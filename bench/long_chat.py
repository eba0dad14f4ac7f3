"""A long chat for Glove's unchanged clients: the unpaged `GET …/messages` streamed whole,
and the published glove-core answering on it, with the server's memory meanwhile.

Starts a live server (Daphne, as `make run`; `--server uvicorn|granian` for the others) on a
PostgreSQL database of its own, fills chats of each `--sizes` length through the store's
append (batches of 1,000 messages of `--text-bytes` characters), then for each chat:

- reads the unpaged GET once (its time, its size, that every message arrived);
- runs tests/examples/glove-core/drive_long_chat.mjs: glove-core 4.1.0 from npm, a store
  adapter over examples/glove-react's store actions, one `processRequest` with a scripted
  model (what the model was handed, the turn's time);
- samples the server process's resident memory every 20 ms during both: the peak above
  what it held before is what serving that chat cost it.

Bounded memory shows as the same peak growth at every size (one chunk of 1,000 messages
per query, streamed); a body built whole grows with the chat (the history's text about
three times over: the rows, their join, the bytes).

    .venv/bin/python bench/long_chat.py                       # 10,000 and 100,000
    .venv/bin/python bench/long_chat.py --sizes 12000 --text-bytes 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal, number  # noqa: E402
from tests.api.liveserver import LiveServer  # noqa: E402

DRIVER = ROOT / "tests" / "examples" / "glove-core" / "drive_long_chat.mjs"
BATCH = 1000


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/glove_bench"),
        help="a PostgreSQL server (the server gets a fresh database of its own on it)",
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--text-bytes", type=int, default=400)
    parser.add_argument("--server", default="daphne", choices=("daphne", "uvicorn", "granian"))
    return parser.parse_args()


def rss_mb(pid: int) -> float:
    """The resident memory of `pid` and its children (granian's workers), in MB."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(child) for child in children.read_text().split()]
    for each in pids:
        try:
            status = Path(f"/proc/{each}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


class Sampler:
    """The peak resident memory of a process while the block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()

    def __enter__(self) -> Sampler:
        self.before = rss_mb(self.pid)
        self.peak = self.before
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mb(self.pid))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb(self.pid))
        self.after = rss_mb(self.pid)


def seed(client: httpx.Client, session_id: str, length: int, text_bytes: int) -> float:
    started = time.monotonic()
    pad = "x" * max(0, text_bytes - 16)
    for start in range(0, length, BATCH):
        batch = [
            {"sender": "user" if n % 2 == 0 else "agent", "text": f"message {n} {pad}"}
            for n in range(start, min(start + BATCH, length))
        ]
        client.post(
            f"/api/sessions/{session_id}/messages", json={"messages": batch}
        ).raise_for_status()
    return time.monotonic() - started


def measure(server: LiveServer, token: str, length: int, text_bytes: int) -> dict:
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=600) as client:
        session_id = client.post("/api/sessions", json={"title": f"{length}"}).json()["sessionId"]
        seed_s = seed(client, session_id, length, text_bytes)
        pid = server._process.pid
        with Sampler(pid) as get_memory:
            started = time.monotonic()
            answer = client.get(f"/api/sessions/{session_id}/messages")
            get_s = time.monotonic() - started
        body = answer.content
        whole = answer.status_code == 200 and len(json.loads(body)) == length
        with Sampler(pid) as turn_memory:
            run = subprocess.run(
                ["node", str(DRIVER), server.url, token, session_id],
                capture_output=True,
                text=True,
                timeout=900,
            )
        if run.returncode != 0:
            raise RuntimeError(f"glove-core failed:\n{run.stderr[-2000:]}")
        out = json.loads(run.stdout)
    return {
        "messages": length,
        "seed_s": round(seed_s, 1),
        "get_status": answer.status_code,
        "get_whole": whole,
        "get_body_mb": round(len(body) / 2**20, 1),
        "get_s": round(get_s, 2),
        "get_server_rss_before_mb": round(get_memory.before, 1),
        "get_server_rss_peak_growth_mb": round(get_memory.peak - get_memory.before, 1),
        "glove_core_model_saw": out["modelCalls"][0]["count"],
        "glove_core_stored_after": out["storedAfter"],
        "glove_core_turn_s": round(out["turnMs"] / 1000, 2),
        "glove_core_server_rss_peak_growth_mb": round(turn_memory.peak - turn_memory.before, 1),
        "server_rss_after_mb": round(turn_memory.after, 1),
    }


def main() -> None:
    args = _parse()
    from tests.examples.test_glove_core_long_chat import installed_glove_core

    installed_glove_core()
    sizes = [int(size) for size in args.sizes.split(",")]
    runs = []
    with LiveServer(database_url=args.database_url, server=args.server) as server:
        token = server.token_for("long-chat")
        for length in sizes:
            print(f"chat of {length:,} messages...", file=sys.stderr)
            runs.append(measure(server, token, length, args.text_bytes))
    longest = runs[-1]
    growths = [run["get_server_rss_peak_growth_mb"] for run in runs]
    print(
        json.dumps(
            {
                "script": "long_chat.py",
                "machine": machine(),
                "config": {"sizes": sizes, "text_bytes": args.text_bytes, "server": args.server},
                "measures": runs,
                "goals": [
                    goal(
                        39,
                        "unchanged glove-core answers on a chat of any length",
                        f"{number(longest['messages'], 0)} messages: the model saw "
                        f"{number(longest['glove_core_model_saw'], 0)}, turn "
                        f"{longest['glove_core_turn_s']} s",
                        longest["get_whole"]
                        and longest["glove_core_model_saw"] == longest["messages"] + 1,
                    ),
                    goal(
                        39,
                        "the server's memory is bounded whatever the chat's length",
                        f"peak growth {', '.join(f'{g} MB' for g in growths)} for "
                        f"{', '.join(number(r['get_body_mb']) + ' MB' for r in runs)} bodies",
                        max(growths) < 0.5 * longest["get_body_mb"] + 20,
                    ),
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
