"""A chat's traces as an OTLP backend receives them from `make serve-prod` and turn workers.

`make serve-prod` (granian's HTTP worker, uvicorn) runs on a SQLite file with
OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver this module starts, which decodes each
export with `opentelemetry-proto`. The turn workers are the test's own `manage.py
turn_worker` processes (TURN_WORKERS=0), as a supervisor runs them: serve-prod stops the
whole stack when its own turn worker dies, and here one is killed in the middle of a turn.

The story is played once for the module (`story`); each test reads one part of it:
1. ann asks the coffee shop to watch for the out-of-stock Yirgacheffe: the turn posts a
   restock watch (an inbox item);
2. bea (staff) resolves the watch over REST, in the HTTP worker; ann asks for news, and
   that turn consumes it on a turn worker;
3. ann adds 6 bags and checks out. The checkout waits on ann's permission prompt, and
   worker A, running it, is killed there; worker B (which parks a turn as soon as it waits
   on a person) takes the turn back after its lease. ann answers the prompt over REST, bea
   approves the large order over REST, ann confirms it on the page.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.healing.serve_prod import ROOT, ServeProd
from tests.healing.stack import PASSWORD, Browser
from tests.observe.otlp_receiver import Receiver

pytestmark = [pytest.mark.apart, pytest.mark.timeout(420)]

WAIT = 120.0
LEASE_SECONDS = 3


# -- the stack --------------------------------------------------------------------------------
class Stack:
    """serve-prod on SQLite, the users of the story, and the test's own turn workers."""

    def __init__(self, serve: ServeProd) -> None:
        self.serve = serve
        self.database = serve.database_url.removeprefix("sqlite:///")
        self.workers: list[subprocess.Popen] = []

    def query(self, sql: str, *args: object) -> list[tuple]:
        with sqlite3.connect(self.database, timeout=30) as conn:
            return conn.execute(sql, args).fetchall()

    def until(self, what: str, sql: str, *args: object) -> list[tuple]:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            rows = self.query(sql, *args)
            if rows:
                return rows
            time.sleep(0.1)
        turns = self.query("SELECT id, status, attempts, resumes, worker_id FROM turns_turn")
        slots = self.query("SELECT turn_id, slot_id, renderer, status FROM turns_turnslot")
        raise AssertionError(f"never happened: {what}\nturns {turns}\nslots {slots}")

    def add_user(self, username: str, *, staff: bool = False, group: str = "") -> str:
        """A user and its API token, written straight into the database (`manage.py shell`
        costs seconds here); the token."""
        from django.contrib.auth.hashers import make_password

        with sqlite3.connect(self.database, timeout=30) as conn:
            user_id = conn.execute(
                "INSERT INTO auth_user (username, password, first_name, last_name, email, "
                "is_superuser, is_staff, is_active, date_joined) "
                "VALUES (?, ?, '', '', '', 0, ?, 1, datetime('now')) RETURNING id",
                (username, make_password(PASSWORD), int(staff)),
            ).fetchone()[0]
            if group:
                conn.execute("INSERT OR IGNORE INTO auth_group (name) VALUES (?)", (group,))
                conn.execute(
                    "INSERT INTO auth_user_groups (user_id, group_id) "
                    "SELECT ?, id FROM auth_group WHERE name = ?",
                    (user_id, group),
                )
            key = f"{username}-token-{user_id:04d}".ljust(40, "0")[:40]
            conn.execute(
                "INSERT INTO authtoken_token (key, created, user_id) "
                "VALUES (?, datetime('now'), ?)",
                (key, user_id),
            )
        return key

    def api(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.serve.url, timeout=30, headers={"Authorization": f"Token {token}"}
        )

    def start_worker(self, **env: str) -> subprocess.Popen:
        log = open(self.serve.folder / f"worker{len(self.workers)}.log", "wb")
        worker = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "python"), "manage.py", "turn_worker"],
            cwd=ROOT,
            env={**self.serve.env, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.workers.append(worker)
        return worker

    def stop_workers(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    def logs(self) -> str:
        tails = [self.serve.log_tail(3000)]
        for log in sorted(self.serve.folder.glob("worker*.log")):
            tails.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(tails)


@dataclass
class Story:
    spans: list[dict]
    ann_session: str
    turns: dict[str, tuple]  # the turn that answered each message: its row
    steps: list[tuple]  # every stored timeline step (turn, attempt, worker, kind, name, ...)
    killed_worker: str
    item: tuple  # the restock watch's inbox row
    asgi_port: int  # uvicorn's
    usage: dict  # every count of the session's tokens, read at the end (REST, rows, /metrics)

    def trace_of(self, text: str) -> list[dict]:
        """Every span of the trace that posted `text`."""
        agent = self.agents(text)[0]
        return [span for span in self.spans if span["trace"] == agent["trace"]]

    def agents(self, text: str) -> list[dict]:
        """The `invoke_agent` spans of the turn that answered `text`, by attempt."""
        turn_id = self.turns[text][0]
        found = [
            span
            for span in self.spans
            if span["name"].startswith("invoke_agent ")
            and span["attributes"].get("glove.turn.id") == turn_id
        ]
        return sorted(found, key=lambda span: span["attributes"]["glove.turn.attempt"])

    def under(self, parent: dict, prefix: str = "") -> list[dict]:
        children = [span for span in self.spans if span["parent"] == parent["id"]]
        return sorted(
            (span for span in children if span["name"].startswith(prefix)),
            key=lambda span: span["start"],
        )


WATCH, NEWS, ADD, CHECKOUT = "watch for Yirgacheffe", "any news?", "add 6 Colombia", "checkout"
TURN_COLUMNS = "id, status, attempts, resumes, worker_id, tokens_in, tokens_out"
METRICS_TOKEN = "metrics-token-0123456789abcdef"


@pytest.fixture(scope="module")
def story() -> Iterator[Story]:
    with Receiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "glove-test",
            # Which process sent a span (the turn workers say their own).
            "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=serve-prod",
            "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
            "GLOVE_TURN_PARK_AFTER_SECONDS": "60",
            "GLOVE_TURN_MAX_ATTEMPTS": "5",
            "GLOVE_TURNS_PER_USER_PER_MINUTE": "1000",
            "GLOVE_METRICS_TOKEN": METRICS_TOKEN,
            # The turn workers this test starts write their metrics where the servers do.
            "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="glove-metrics-"),
        }
        with ServeProd(http_workers=1, ws_workers=2, turn_workers=0, extra_env=env) as serve:
            stack = Stack(serve)
            try:
                yield play(stack, receiver)
            finally:
                stack.stop_workers()


def play(stack: Stack, receiver: Receiver) -> Story:
    ann_token = stack.add_user("ann")
    bea_token = stack.add_user("bea", staff=True, group="baristas")
    worker_a = stack.start_worker(OTEL_RESOURCE_ATTRIBUTES="service.instance.id=worker-a")
    ann = Browser(stack.serve, username="ann")
    session_id = ann.new_session()
    turns: dict[str, tuple] = {}

    def say(text: str) -> int:
        posted = ann.post(f"/sessions/{session_id}/messages", {"text": text})
        assert posted.status_code == 303, posted.text
        [(turn_id,)] = stack.until(
            f"the turn of {text!r}",
            "SELECT id FROM turns_turn WHERE session_id = ? AND text = ?",
            session_id,
            text,
        )
        return turn_id

    def done(text: str, turn_id: int) -> None:
        stack.until(
            f"{text!r} answered",
            "SELECT 1 FROM turns_turn WHERE id = ? AND status IN ('done', 'failed')",
            turn_id,
        )
        [turns[text]] = stack.query(f"SELECT {TURN_COLUMNS} FROM turns_turn WHERE id = ?", turn_id)
        assert turns[text][1] == "done", (text, turns[text], stack.logs())

    # 1-2. The restock watch, resolved by bea over REST, consumed by ann's next turn.
    done(WATCH, say(WATCH))
    [(item_id,)] = stack.until("the watch", "SELECT id FROM inbox_inboxitem")
    resolved = stack.api(bea_token).post(
        "/api/inbox/resolve", json={"itemId": item_id, "response": "Back on Monday."}
    )
    assert resolved.status_code == 200, resolved.text
    done(NEWS, say(NEWS))
    # ann reads her chat from uvicorn (the websocket server serves every route over ASGI).
    assert ann.client.get(f"{stack.serve.ws_url}/sessions/{session_id}/").status_code == 200

    # 3. The checkout; worker A dies while the turn waits on ann's permission prompt.
    done(ADD, say(ADD))
    checkout = say(CHECKOUT)
    [(slot_id, killed)] = stack.until(
        "the checkout waits on the permission prompt",
        "SELECT s.slot_id, t.worker_id FROM turns_turnslot s JOIN turns_turn t "
        "ON t.id = s.turn_id WHERE t.id = ? AND s.renderer = 'permission_request' "
        "AND s.status = 'open' AND t.status = 'running'",
        checkout,
    )
    worker_a.send_signal(signal.SIGKILL)
    worker_a.wait()
    stack.start_worker(
        GLOVE_TURN_PARK_AFTER_SECONDS="0", OTEL_RESOURCE_ATTRIBUTES="service.instance.id=worker-b"
    )
    stack.until(
        "worker B takes the turn back",
        "SELECT 1 FROM turns_turn WHERE id = ? AND attempts > 1 AND worker_id <> ?",
        checkout,
        killed,
    )
    answered = stack.api(ann_token).post(
        f"/api/sessions/{session_id}/permission-prompts/t{checkout}-{slot_id}",
        json={"decision": "approve"},
    )
    assert answered.status_code == 200, answered.text

    [(request_id, fingerprint)] = stack.until(
        "bea is asked to approve",
        "SELECT id, fingerprint FROM approvals_approvalrequest WHERE session_id = ?",
        session_id,
    )
    decided = stack.api(bea_token).post(
        f"/api/approvals/{request_id}/decide",
        json={"decision": "approve", "fingerprint": fingerprint},
    )
    assert decided.status_code == 200, decided.text

    [(confirm_slot,)] = stack.until(
        "ann is asked to confirm",
        "SELECT slot_id FROM turns_turnslot WHERE turn_id = ? AND renderer = 'checkout' "
        "AND status = 'open'",
        checkout,
    )
    confirmed = ann.post(
        f"/sessions/{session_id}/slots/t{checkout}-{confirm_slot}", {"value": "confirm"}
    )
    assert confirmed.status_code == 303, confirmed.text
    done(CHECKOUT, checkout)

    # Every process exports within OTEL_BSP_SCHEDULE_DELAY of a span's end: wait for the
    # last attempt's `invoke_agent` (the last span a turn ends).
    last = turns[CHECKOUT][2]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(
        span["attributes"].get("glove.turn.id") == checkout
        and span["attributes"].get("glove.turn.attempt") == last
        for span in receiver.named("invoke_agent ")
    ):
        time.sleep(0.1)
    time.sleep(0.5)  # and the HTTP worker's last request spans
    with receiver.lock:
        spans = list(receiver.spans)
    return Story(
        spans=spans,
        ann_session=session_id,
        turns=turns,
        steps=stack.query(
            "SELECT turn_id, attempt, worker_id, kind, name, outcome, duration_ms, detail "
            "FROM turns_turnstep ORDER BY turn_id, attempt, started_at, id"
        ),
        killed_worker=killed,
        asgi_port=int(stack.serve.ws_url.rsplit(":", 1)[1]),
        item=stack.query(
            "SELECT id, status, resolved_by, trace_parent FROM inbox_inboxitem WHERE id = ?",
            item_id,
        )[0],
        usage={
            "rest": stack.api(ann_token).get(f"/api/sessions/{session_id}").json(),
            "session": stack.query(
                "SELECT tokens_in_total, tokens_out_total FROM conversations_session WHERE key = ?",
                session_id,
            )[0],
            "turns": stack.query(
                "SELECT coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) "
                "FROM turns_turn t JOIN conversations_session s ON s.id = t.session_id "
                "WHERE s.key = ?",
                session_id,
            )[0],
            "metrics": httpx.get(
                f"{stack.serve.url}/metrics",
                headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
                timeout=30,
            ).text,
        },
    )


# -- the tests --------------------------------------------------------------------------------
def test_a_turn_is_one_trace_from_the_posting_request_with_genai_spans(story):
    [agent] = story.agents(WATCH)
    assert agent["name"] == "invoke_agent coffee"
    assert agent["service"] == "glove-test"
    assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert agent["attributes"]["gen_ai.agent.name"] == "coffee"
    assert agent["attributes"]["gen_ai.conversation.id"] == story.ann_session
    assert agent["attributes"]["glove.turn.attempt"] == 1
    assert agent["attributes"]["glove.turn.status"] == "done"

    # Its parent is the Django request that posted the message, in the HTTP worker.
    [request] = [span for span in story.spans if span["id"] == agent["parent"]]
    assert request["trace"] == agent["trace"] and request["parent"] == ""
    assert request["name"] == "POST sessions/<str:session_id>/messages"
    assert request["attributes"]["http.status_code"] == 303
    assert (request["process"], agent["process"]) == ("serve-prod", "worker-a")

    chats = story.under(agent, "chat ")
    assert [span["name"] for span in chats] == ["chat demo"] * 3
    assert all(span["attributes"]["gen_ai.provider.name"] == "demo" for span in chats)
    assert {span["attributes"]["gen_ai.request.model"] for span in chats} == {"demo"}
    assert [span["name"] for span in story.under(agent, "execute_tool ")] == [
        "execute_tool check_stock",
        "execute_tool glove_post_to_inbox",
    ]
    assert all(
        span["attributes"]["glove.tool.outcome"] == "success"
        for span in story.under(agent, "execute_tool ")
    )


def test_the_chat_spans_token_counts_are_the_stored_ones(story):
    for text in (WATCH, CHECKOUT):
        turn_id, _, _, _, _, tokens_in, tokens_out = story.turns[text]
        # Only attempts that ended export their spans (the killed one's died with it); the
        # turn counts every reply stored, the killed attempt's too, as its steps do.
        agents = story.agents(text)
        chats = [chat for agent in agents for chat in story.under(agent, "chat ")]
        assert chats, text
        steps = [
            detail_of(step) for step in story.steps if step[0] == turn_id and step[3] == "model"
        ]
        assert sum(step["input_tokens"] for step in steps) == tokens_in
        assert sum(step["output_tokens"] for step in steps) == tokens_out
        # Each traced call's, as its timeline step stored it.
        attempts = {agent["attributes"]["glove.turn.attempt"] for agent in agents}
        stored = sorted(
            (detail_of(step)["input_tokens"], detail_of(step)["output_tokens"])
            for step in story.steps
            if step[0] == turn_id and step[1] in attempts and step[3] == "model"
        )
        traced = sorted(
            (
                chat["attributes"]["gen_ai.usage.input_tokens"],
                chat["attributes"]["gen_ai.usage.output_tokens"],
            )
            for chat in chats
        )
        assert traced == stored, text


def test_a_retry_after_the_worker_was_killed_mid_turn_is_a_span_naming_the_dead_worker(story):
    agents = story.agents(CHECKOUT)
    # Attempt 1 died with worker A (its `invoke_agent` never ended); attempt 2 is worker B's.
    attempts = [agent["attributes"]["glove.turn.attempt"] for agent in agents]
    assert attempts == list(range(2, 2 + len(attempts))), attempts
    retried = agents[0]
    assert retried["attributes"]["glove.worker.id"] != story.killed_worker
    [retry] = [span for span in story.spans if span["name"] == "glove.retry"]
    assert retry["parent"] == retried["id"] and retry["trace"] == retried["trace"]
    assert retry["attributes"]["glove.turn.attempt"] == 2
    assert retry["attributes"]["glove.retry.previous_worker"] == story.killed_worker
    # Every attempt of the turn, before and after the kill, is in the posting request's trace.
    [request] = [span for span in story.spans if span["id"] == retried["parent"]]
    assert request["name"] == "POST sessions/<str:session_id>/messages"
    assert {a["parent"] for a in agents} == {request["id"]}
    assert agents[-1]["attributes"]["glove.turn.status"] == "done"


def test_each_wait_on_a_person_is_a_span_with_who_answered_and_how(story):
    agents = story.agents(CHECKOUT)
    waits = {
        span["attributes"]["glove.wait.kind"]: (span, agent)
        for agent in agents
        for span in story.under(agent, "glove.wait ")
    }
    assert set(waits) == {"permission_request", "approval_request", "checkout"}

    permission, closed_by = waits["permission_request"]
    assert permission["attributes"]["glove.wait.outcome"] == "resolved"
    assert permission["attributes"]["glove.wait.decider"] == "ann"
    assert permission["attributes"]["glove.wait.channel"] == "rest"
    assert permission["attributes"]["gen_ai.tool.name"] == "checkout"
    # Pushed by the attempt that died, closed by a later one: the wait starts at the push.
    assert closed_by["attributes"]["glove.turn.attempt"] >= 2
    assert permission["start"] < agents[0]["start"]
    assert permission["attributes"]["glove.wait.seconds"] == pytest.approx(
        (permission["end"] - permission["start"]) / 1e9, abs=0.01
    )

    approval, _ = waits["approval_request"]
    assert approval["name"] == "glove.wait approval_request"
    assert approval["attributes"]["glove.wait.decider"] == "bea"
    assert approval["attributes"]["glove.wait.channel"] == "rest"
    assert approval["attributes"]["glove.wait.decision"] == "approve"

    confirm, _ = waits["checkout"]
    assert confirm["attributes"]["glove.wait.decider"] == "ann"
    assert confirm["attributes"]["glove.wait.channel"] == "page"

    # The timeline stored the same waits, with the same people.
    stored = {step[4]: detail_of(step) for step in story.steps if step[3] == "wait"}
    assert stored["approval_request"]["decider"] == "bea"
    assert stored["permission_request"]["channel"] == "rest"


def test_an_inbox_resolution_and_the_turn_that_consumed_it_are_linked_across_processes(story):
    item_id, status, resolved_by, trace_parent = story.item
    assert status == "consumed" and resolved_by == "api" and trace_parent

    [resolve] = [span for span in story.spans if span["name"] == "glove.inbox.resolve"]
    assert resolve["attributes"]["glove.inbox.item_id"] == item_id
    assert resolve["attributes"]["glove.wait.decider"] == "bea"
    # In the HTTP worker, under the request that resolved it.
    [request] = [span for span in story.spans if span["id"] == resolve["parent"]]
    assert request["name"].startswith("POST ") and request["name"].endswith("inbox/resolve")

    [agent] = story.agents(NEWS)
    [wait] = story.under(agent, "glove.wait ")
    assert wait["name"] == "glove.wait inbox"
    assert wait["attributes"]["glove.inbox.item_id"] == item_id
    assert wait["attributes"]["glove.inbox.tag"] == "restock_watch"
    assert wait["attributes"]["glove.wait.channel"] == "api"
    assert wait["attributes"]["glove.wait.decider"] == "bea"
    assert wait["links"] == [(resolve["trace"], resolve["id"])]
    assert (resolve["process"], wait["process"]) == ("serve-prod", "worker-a")
    # The wait ran from the watch's post (in the first turn) to its resolution.
    assert wait["start"] < story.agents(NEWS)[0]["start"]
    assert wait["end"] <= resolve["end"]


def test_a_request_served_over_asgi_is_traced_too(story):
    [page] = [span for span in story.spans if span["name"] == "GET sessions/<str:session_id>/"]
    port = page["attributes"].get("server.port", page["attributes"].get("net.host.port"))
    assert port == story.asgi_port, page
    assert page["attributes"]["http.status_code"] == 200


def detail_of(step: tuple) -> dict:
    return json.loads(step[7]) if isinstance(step[7], str) else (step[7] or {})


def test_no_span_of_the_killed_attempt_arrives_without_its_parent(story):
    """Worker A died while the checkout waited on ann: the spans of its attempt (its model
    calls, its tools) were exported before it died, under an `invoke_agent` that never
    arrived. Now they go out with it or not at all: every span's parent is in the trace."""
    ids = {span["id"] for span in story.spans}
    orphans = [
        (span["name"], span["attributes"].get("glove.turn.attempt"))
        for span in story.spans
        if span["parent"] and span["parent"] not in ids
    ]
    assert orphans == []
    checkout = story.agents(CHECKOUT)
    assert all(agent["attributes"]["glove.worker.id"] != story.killed_worker for agent in checkout)


def test_the_killed_attempts_tokens_are_counted_once_and_alike_everywhere(story):
    """Worker A stored the checkout's first reply, then died: its tokens were in the
    session's counters but on no turn and under no model (the REST cost said "(model not
    recorded)"), and the three totals differed. Each reply's tokens are now counted with it:
    the session's counters, its turns, its REST usage and cost, and `/metrics` agree."""
    from prometheus_client.parser import text_string_to_metric_families

    tokens_in, tokens_out = story.usage["session"]
    rest = story.usage["rest"]
    assert tokens_in > 0
    assert tuple(story.usage["turns"]) == (tokens_in, tokens_out)
    assert (rest["usage"]["tokensIn"], rest["usage"]["tokensOut"]) == (tokens_in, tokens_out)
    assert "(model not recorded)" not in rest["cost"]["unknownModels"]
    assert "(model not recorded)" not in rest["cost"]["byModel"]
    counted = {"input": 0.0, "output": 0.0}
    for family in text_string_to_metric_families(story.usage["metrics"]):
        for sample in family.samples:
            if (
                sample.name == "glove_model_tokens_total"
                and sample.labels["gen_ai_token_type"] in counted
            ):
                counted[sample.labels["gen_ai_token_type"]] += sample.value
    assert counted == {"input": tokens_in, "output": tokens_out}
