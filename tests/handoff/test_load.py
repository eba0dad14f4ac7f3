"""Fifty chats handed to people and back at once, under a turn load, on a PostgreSQL of the
test's own (tests/servers.py) with a server and two real turn workers; then the same with a
turn worker SIGKILLed and PostgreSQL restarted in the middle.

Each chat, in a thread of its own: the customer (REST, by token) asks two questions and,
while their turns are queued or running, asks for a person (`POST /api/sessions/<id>/handoff`);
says something while the chat waits; three baristas click Claim on the console at once; the
winner replies, the customer answers, the winner replies again and hands back with a summary;
the customer asks once more and the agent answers. A request cut by a fault (a dropped
connection, a 503 while the database is away) is sent again: a message under a new text, so
each text names one acknowledged request.

Then, from the database: every turn ended; each chat was claimed once (the audit's one
`claimed` record, at most one claimant told it won, the others told who did); no message of
the agent's own between the first and the last message of the human stretch; every
acknowledged message of the customer's and of the person's stored exactly once, nothing
stored twice; after the hand-back the agent answered.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import psycopg
import pytest

from tests.api.liveserver import LiveServer
from tests.healing.conftest import add_user
from tests.healing.stack import PASSWORD, Browser, query, wait_until_finished

pytestmark = pytest.mark.timeout(600)

CHATS = 50
STAFF = ("bea", "bo", "cy")
LEASE_SECONDS = 4
# How long a request is sent again while a fault lasts, and how long the turns may take to
# finish afterwards (the promise is the lease plus 10 s; a shared 2-core machine is slower).
RETRY_FOR = 90.0
SETTLE_FOR = 240.0
# Answers that say "not now, nothing was done": sent again.
AGAIN = {429, 502, 503, 504}


@pytest.fixture
def stack(postgres) -> Iterator[LiveServer]:
    env = {
        "GLOVE_TASKS_BACKEND": "db",
        "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
        "GLOVE_TURN_DB_THREADS": "2",
        "GLOVE_TURNS_PER_USER_PER_MINUTE": "10000",
        "GLOVE_MAX_QUEUED_MESSAGES": "50",
        "REDIS_URL": "",
    }
    with LiveServer(database_url=postgres.url(), extra_env=env) as server:
        for name in STAFF:
            add_user(server.database_url, name, PASSWORD)
            query(
                server.database_url,
                "UPDATE auth_user SET is_staff = true, first_name = %s WHERE username = %s "
                "RETURNING id",
                name.title(),
                name,
            )
        server.start_worker()
        server.start_worker()
        yield server


@dataclass
class Chat:
    """One chat's requests, as the clients saw them."""

    key: str
    pk: str = ""
    said: list[str] = field(default_factory=list)  # the customer's acknowledged texts
    replied: list[str] = field(default_factory=list)  # the person's acknowledged texts
    claims: Counter = field(default_factory=Counter)  # claim answer -> how many claimants
    last_question: str = ""


def _send(client: httpx.Client, method: str, path: str, **kwargs) -> httpx.Response | None:
    """One request, sent again while the server says the database is away; None when the
    connection dropped (the request may or may not have been done)."""
    deadline = time.monotonic() + RETRY_FOR
    while True:
        try:
            answer = client.request(method, path, **kwargs)
        except httpx.HTTPError:
            return None
        if answer.status_code not in AGAIN or time.monotonic() > deadline:
            return answer
        time.sleep(0.3)


def _query_again(database_url: str, sql: str, *args: object) -> list[tuple]:
    """`query`, again while the database restarts."""
    deadline = time.monotonic() + RETRY_FOR
    while True:
        try:
            return query(database_url, sql, *args)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _until_done(send, what: str, *, done=(200, 201, 202, 302, 303)) -> httpx.Response:
    """`send(attempt)` until an answer in `done`; each attempt may use a new text."""
    deadline = time.monotonic() + RETRY_FOR
    attempt = 0
    while True:
        answer = send(attempt)
        if answer is not None and answer.status_code in done:
            return answer
        if answer is not None and answer.status_code not in AGAIN:
            raise AssertionError(f"{what}: {answer.status_code} {answer.text[:300]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: no answer within {RETRY_FOR} s")
        attempt += 1
        time.sleep(0.3)


class Scenario:
    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.token = server.token_for("ann")
        self.staff = {name: Browser(server, name) for name in STAFF}
        self.claimed = threading.Semaphore(0)  # released once per claimed chat

    def customer(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url,
            headers={"Authorization": f"Token {self.token}"},
            timeout=60,
        )

    def say(self, api: httpx.Client, chat: Chat, text: str) -> int:
        """The customer's message (a turn), sent until acknowledged; the turn's id."""

        def send(attempt: int) -> httpx.Response | None:
            wording = f"{text} #{attempt}"
            answer = _send(
                api, "POST", f"/api/sessions/{chat.key}/agent/turns", json={"text": wording}
            )
            if answer is not None and answer.status_code == 202:
                chat.said.append(wording)
            return answer

        return _until_done(send, f"say {text!r}", done=(202,)).json()["turnId"]

    def wait_for_turn(self, api: httpx.Client, chat: Chat, turn_id: int) -> None:
        deadline = time.monotonic() + SETTLE_FOR
        while time.monotonic() < deadline:
            answer = _send(api, "GET", f"/api/sessions/{chat.key}/agent/turns/{turn_id}")
            if answer is not None and answer.status_code == 200:
                if answer.json()["state"] in ("done", "failed", "cancelled"):
                    return
            time.sleep(0.2)
        raise AssertionError(f"turn {turn_id} of {chat.key} never ended")

    def staff_post(self, name: str, chat: Chat, action: str, data: dict) -> httpx.Response | None:
        browser = self.staff[name]
        token = browser.client.cookies.get("csrftoken")
        return _send(
            browser.client,
            "POST",
            f"/handoffs/{chat.pk}/{action}",
            data={**data, "csrfmiddlewaretoken": token},
        )

    def claim_round(self, chat: Chat) -> str:
        """Every barista clicks Claim at once; the one the chat went to. Each is told it
        won (302) or who did (409); a claimant whose first answer was lost in a fault may
        be told on its second try that the chat is taken, by itself."""
        start = threading.Barrier(len(STAFF))

        def click(name: str) -> str:
            start.wait()
            answer = _until_done(
                lambda _: self.staff_post(name, chat, "claim", {}),
                f"claim {chat.key} as {name}",
                done=(302, 409),
            )
            return "won" if answer.status_code == 302 else "lost"

        with ThreadPoolExecutor(len(STAFF)) as pool:
            outcomes = dict(zip(STAFF, pool.map(click, STAFF), strict=True))
        chat.claims.update(outcomes.values())
        holder = _query_again(
            self.server.database_url,
            "SELECT u.username FROM conversations_session s "
            "JOIN auth_user u ON u.id = s.answerer_person_id WHERE s.id = %s",
            chat.pk,
        )
        assert holder, f"{chat.key}: claimed by nobody ({outcomes})"
        winner = holder[0][0]
        told_won = [name for name, outcome in outcomes.items() if outcome == "won"]
        assert told_won in ([winner], []), (chat.key, winner, outcomes)
        self.claimed.release()
        return winner

    def reply(self, name: str, chat: Chat, text: str) -> None:
        def send(attempt: int) -> httpx.Response | None:
            wording = f"{text} #{attempt}"
            answer = self.staff_post(name, chat, "reply", {"text": wording})
            if answer is not None and answer.status_code == 302:
                chat.replied.append(wording)
            return answer

        _until_done(send, f"reply to {chat.key}", done=(302,))

    def run(self, chat: Chat) -> None:
        api = self.customer()
        with api:
            self.say(api, chat, f"show me the menu ({chat.key} 1)")
            self.say(api, chat, f"show me the menu ({chat.key} 2)")
            # A person is asked for while those turns are queued or running.
            asked = _until_done(
                lambda _: _send(
                    api, "POST", f"/api/sessions/{chat.key}/handoff", json={"reason": "load"}
                ),
                f"handoff {chat.key}",
                done=(200, 409),
            )
            if asked.status_code == 409:  # an earlier try was done, its answer lost
                assert asked.json()["answerer"]["state"] == "queued", asked.text
            self.say(api, chat, f"is anyone there ({chat.key})")
            winner = self.claim_round(chat)
            self.reply(winner, chat, f"A barista here ({chat.key})")
            self.say(api, chat, f"my latte was cold ({chat.key})")
            self.reply(winner, chat, f"A fresh one is coming ({chat.key})")
            handed = _until_done(
                lambda _: self.staff_post(winner, chat, "hand-back", {"summary": "Fresh latte."}),
                f"hand back {chat.key}",
                done=(302, 409),
            )
            if handed.status_code == 409:
                assert "agent answers" in handed.text, handed.text
            turn_id = self.say(api, chat, f"show me the menu ({chat.key} after)")
            chat.last_question = chat.said[-1]
            self.wait_for_turn(api, chat, turn_id)

    def create_chats(self) -> list[Chat]:
        chats = []
        with self.customer() as api:
            for index in range(CHATS):
                key = f"load-{index:02d}"
                made = api.post("/api/sessions", json={"sessionId": key, "title": key})
                assert made.status_code == 201, made.text
                chats.append(Chat(key=key))
        rows = dict(
            query(
                self.server.database_url,
                "SELECT key, id FROM conversations_session WHERE key = ANY(%s)",
                [chat.key for chat in chats],
            )
        )
        for chat in chats:
            chat.pk = rows[chat.key]
        return chats

    def run_all(self, chats: list[Chat]) -> None:
        with ThreadPoolExecutor(CHATS) as pool:
            for outcome in pool.map(self.run, chats):
                assert outcome is None


def check(server: LiveServer, chats: list[Chat], *, faults: bool) -> dict:
    """The promises, from the database; figures to print. Without faults every claimant
    got its true answer: exactly one was told it won."""
    finished = wait_until_finished(server.database_url, SETTLE_FOR)
    assert finished is not None, "turns left unfinished"
    url = server.database_url
    for chat in chats:
        assert chat.claims["won"] == 1 or (faults and chat.claims["won"] == 0), chat.claims
        assert sum(chat.claims.values()) == len(STAFF), (chat.key, chat.claims)
        (state,) = query(url, "SELECT answerer FROM conversations_session WHERE id = %s", chat.pk)[
            0
        ]
        assert state == "agent", (chat.key, state)
        kinds = [
            kind
            for (kind,) in query(
                url,
                "SELECT kind FROM conversations_handoffrecord WHERE session_id = %s ORDER BY id",
                chat.pk,
            )
        ]
        assert kinds == ["requested", "claimed", "handed_back"], (chat.key, kinds)
        ((from_seq, to_seq),) = query(
            url,
            "SELECT from_seq, to_seq FROM conversations_handoffrecord "
            "WHERE session_id = %s AND kind = 'handed_back'",
            chat.pk,
        )
        rows = query(
            url,
            "SELECT seq, sender, text, extra, framework_context, tool_results "
            "FROM conversations_message WHERE session_id = %s ORDER BY seq",
            chat.pk,
        )
        agent_own = [
            (seq, text)
            for seq, sender, text, extra, context, _ in rows
            if sender == "agent" and not (extra or {}).get("author") and context is None
        ]
        during = [(seq, text) for seq, text in agent_own if from_seq <= seq <= to_seq]
        assert during == [], (chat.key, from_seq, to_seq, during)
        customer = [
            text
            for _, sender, text, _, context, results in rows
            if sender == "user" and context is None and not results
        ]
        person = [text for _, _, text, extra, _, _ in rows if (extra or {}).get("author")]
        assert sorted(customer) == sorted(set(customer)), (
            chat.key,
            "stored twice",
            customer,
            _history(url, chat.pk),
        )
        assert sorted(person) == sorted(set(person)), (chat.key, "stored twice", person)
        assert set(chat.said) <= set(customer), (chat.key, set(chat.said) - set(customer))
        assert set(chat.replied) <= set(person), (chat.key, set(chat.replied) - set(person))
        assert sorted(person) == sorted(chat.replied), (chat.key, person, chat.replied)
        asked_at = next(seq for seq, _, text, *_ in rows if text == chat.last_question)
        assert any(seq > asked_at for seq, _ in agent_own), (chat.key, "no answer after", rows)
    turns = dict(query(url, "SELECT status, count(*) FROM turns_turn GROUP BY 1"))
    return {"turns": turns, "settled_s": round(finished, 2)}


def _history(url: str, session_pk: str) -> dict:
    """What a failed promise is read against: the chat's messages and turns."""
    return {
        "messages": query(
            url,
            "SELECT seq, sender, left(text, 60), created_at FROM conversations_message "
            "WHERE session_id = %s ORDER BY seq",
            session_pk,
        ),
        "turns": query(
            url,
            "SELECT id, left(text, 60), status, attempts, base_seq, worker_id, error "
            "FROM turns_turn WHERE session_id = %s ORDER BY id",
            session_pk,
        ),
    }


def test_fifty_chats_hand_off_and_back_under_a_turn_load(stack):
    scenario = Scenario(stack)
    chats = scenario.create_chats()
    started = time.monotonic()
    scenario.run_all(chats)
    figures = check(stack, chats, faults=False)
    print(f"\n{CHATS} chats handed off and back in {time.monotonic() - started:.1f} s; {figures}")


@pytest.mark.faults
def test_fifty_chats_hand_off_and_back_through_a_worker_kill_and_a_database_restart(
    stack, postgres
):
    scenario = Scenario(stack)
    chats = scenario.create_chats()
    faults: dict = {}

    def break_things() -> None:
        # Once a third of the chats are a person's: turns are running, chats are queued,
        # claimed and being handed back.
        for _ in range(CHATS // 3):
            scenario.claimed.acquire()
        victim, faults["running_on_victim"] = _a_busy_worker(stack)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        stack.start_worker()
        faults["database_away_s"] = round(postgres.restart(), 2)

    breaker = threading.Thread(target=break_things)
    breaker.start()
    started = time.monotonic()
    try:
        scenario.run_all(chats)
    finally:
        breaker.join(timeout=RETRY_FOR)
    assert "database_away_s" in faults, "the faults never happened"
    figures = check(stack, chats, faults=True)
    print(
        f"\n{CHATS} chats handed off and back in {time.monotonic() - started:.1f} s through a "
        f"worker SIGKILL and a PostgreSQL restart; {faults}; {figures}"
    )


def _a_busy_worker(server: LiveServer):
    """The worker holding the most running turns (polled for a while: the demo's turns are
    short), else the first one alive; and how many it holds."""
    deadline = time.monotonic() + 20
    alive = [worker for worker in server.workers if worker.poll() is None]
    while time.monotonic() < deadline:
        holders = query(
            server.database_url,
            "SELECT worker_id, count(*) FROM turns_turn WHERE status = 'running' "
            "GROUP BY 1 ORDER BY 2 DESC",
        )
        for worker_id, running in holders:
            pid = int(worker_id.split(":")[1])
            for worker in alive:
                if worker.pid == pid:
                    return worker, running
        time.sleep(0.005)
    return alive[0], 0
