"""A real Prometheus scrapes `make serve-prod` while chat turns run, and adds them up right.

The documented production command (two granian HTTP workers, two uvicorn websocket workers,
two turn workers, on a SQLite file) with GLOVE_METRICS_TOKEN set; Debian's `prometheus`
scrapes `/metrics` every second with that bearer token, whichever HTTP worker answers. A
user posts messages to several chats; once every turn has ended, Prometheus' HTTP API must
say exactly that many turns started and finished, with as many duration observations, and
as many model calls as the turns made, although no single process ran them all.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.api import liveserver
from tests.conftest import service_missing
from tests.healing.serve_prod import ServeProd, free_port
from tests.healing.stack import PASSWORD, Browser

pytestmark = [pytest.mark.apart, pytest.mark.timeout(300)]

TOKEN = "scrape-token-9f8e7d6c5b4a3210"
SESSIONS = 3
ROUNDS = 2
WAIT = 120.0


class Prometheus:
    """Debian's prometheus on a free port, scraping `target` every second."""

    def __init__(self, target: str, token: str) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="glove-prometheus-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (self.folder / "prometheus.yml").write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  scrape_timeout: 1s\n"
            "scrape_configs:\n"
            "  - job_name: glove\n"
            "    metrics_path: /metrics\n"
            "    authorization:\n"
            f"      credentials: {token}\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Prometheus:
        self.log = open(self.folder / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [
                shutil.which("prometheus") or "prometheus",
                f"--config.file={self.folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_tail()
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus did not come up:\n{self.log_tail()}")

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def log_tail(self) -> str:
        return (self.folder / "prometheus.log").read_text(errors="replace")[-4000:]

    def query(self, expression: str) -> float | None:
        """The instant value of `expression` (a single number), None while it has none."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expression}, timeout=5)
        answer.raise_for_status()
        result = answer.json()["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def target_health(self) -> str:
        targets = httpx.get(f"{self.url}/api/v1/targets", timeout=5).json()
        active = targets["data"]["activeTargets"]
        return ", ".join(f"{t['health']} {t.get('lastError', '')}".strip() for t in active)

    def until(self, expression: str, expected: float, timeout: float = 30.0) -> float | None:
        """Poll `expression` until it equals `expected` (scrapes are a second apart)."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = self.query(expression)
            if seen == expected:
                return seen
            time.sleep(0.5)
        return seen


def add_user(stack: ServeProd, username: str) -> None:
    liveserver.add_user(stack.database_url, username, PASSWORD)


def turn_rows(stack: ServeProd) -> list[tuple[str, str]]:
    database = stack.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(database, timeout=10) as conn:
        return conn.execute("SELECT status, worker_id FROM turns_turn").fetchall()


def test_prometheus_adds_up_the_turns_of_every_worker_process():
    if shutil.which("prometheus") is None:
        service_missing("Debian's prometheus package is not installed (.ci/ensure-services)")
    env = {
        "GLOVE_METRICS_TOKEN": TOKEN,
        "GLOVE_TURNS_PER_USER_PER_MINUTE": "1000",
        # The multiprocess folder is the launcher's own (a temporary one).
        "PROMETHEUS_MULTIPROC_DIR": "",
    }
    with ServeProd(http_workers=2, ws_workers=2, turn_workers=2, extra_env=env) as stack:
        add_user(stack, "ann")
        browser = Browser(stack, username="ann")
        sessions = [browser.new_session() for _ in range(SESSIONS)]
        with Prometheus(f"127.0.0.1:{stack.port}", TOKEN) as prometheus:
            posted = 0
            for round_number in range(ROUNDS):
                for session_id in sessions:
                    response = browser.post(
                        f"/sessions/{session_id}/messages",
                        {"text": f"show me the menu ({round_number})"},
                    )
                    assert response.status_code == 303, response.text
                    posted += 1

            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                rows = turn_rows(stack)
                if len(rows) == posted and all(s not in ("queued", "running") for s, _ in rows):
                    break
                time.sleep(0.2)
            rows = turn_rows(stack)
            assert len(rows) == posted, stack.log_tail()
            assert {status for status, _ in rows} == {"done"}, rows
            workers = {worker for _, worker in rows}
            print(f"\n{posted} turns on {len(workers)} turn worker(s): {sorted(workers)}")

            agent = 'gen_ai_agent_name="coffee"'
            finished = prometheus.until(
                f'sum(glove_turns_finished_total{{{agent},status="done"}})', posted
            )
            assert finished == posted, (
                f"Prometheus saw {finished} of {posted}; targets: {prometheus.target_health()}\n"
                f"{stack.log_tail()}"
            )
            assert prometheus.query(f"sum(glove_turns_started_total{{{agent}}})") == posted
            assert prometheus.query(f"sum(glove_turn_duration_seconds_count{{{agent}}})") == posted
            inf_bucket = f'sum(glove_turn_duration_seconds_bucket{{{agent},le="+Inf"}})'
            assert prometheus.query(inf_bucket) == posted
            assert (
                prometheus.query(f"sum(glove_turn_queue_wait_seconds_count{{{agent}}})") == posted
            )
            # Each menu question is two model calls (the tool call, the reply after it).
            model_calls = (
                'sum(gen_ai_client_operation_duration_seconds_count{gen_ai_request_model="demo"})'
            )
            assert prometheus.query(model_calls) == 2 * posted
            tool_calls = f'sum(glove_tool_calls_total{{{agent},outcome="success"}})'
            assert prometheus.query(tool_calls) == posted
            assert prometheus.query("glove_turns_queued") == 0
            assert prometheus.query("glove_turns_running") == 0
