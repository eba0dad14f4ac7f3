"""A wait on a person survives the worker (issue 34): the coffee demo's checkout of 6 bags
with the saved card waits three times, on the customer's permission prompt, on a barista's
approval and on the customer's "Confirm your order" slot. At each wait the worker running
the turn is killed (and restarted, as systemd would), or frozen past its lease (SIGSTOP,
then SIGCONT once the other worker took the turn back), or the turn parks and every worker
is restarted. Each person then answers (the customer over REST and the page, the barista
over REST): the prompt, request and slot keep their ids, the order is placed exactly once,
the barista got one e-mail, and the customer's stream goes on to the end of the turn.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.api.liveserver import LiveServer
from tests.approvals.mailserver import SmtpServer
from tests.healing.stack import PASSWORD, Browser, query
from tests.servers import through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

LEASE_SECONDS = 2
COFFEE = "Colombia Huila"
WAIT = 90.0


def _add_user(database_url: str, username: str, *, email: str = "", group: str = "") -> str:
    """A user (and its API token) written straight into the server's database."""
    from django.contrib.auth.hashers import make_password

    [(user_id,)] = query(
        database_url,
        "INSERT INTO auth_user (username, password, first_name, last_name, email, "
        "is_superuser, is_staff, is_active, date_joined) "
        "VALUES (%s, %s, '', '', %s, false, %s, true, now()) RETURNING id",
        username,
        make_password(PASSWORD),
        email,
        bool(group),
    )
    if group:
        query(
            database_url,
            "INSERT INTO auth_group (name) VALUES (%s) ON CONFLICT (name) DO NOTHING RETURNING id",
            group,
        )
        query(
            database_url,
            "INSERT INTO auth_user_groups (user_id, group_id) "
            "SELECT %s, id FROM auth_group WHERE name = %s RETURNING id",
            user_id,
            group,
        )
    key = f"{username}-token-{user_id:04d}".ljust(40, "0")[:40]
    query(
        database_url,
        "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, now(), %s) RETURNING key",
        key,
        user_id,
    )
    return key


class Stack:
    def __init__(self, server: LiveServer, smtp: SmtpServer) -> None:
        self.server, self.smtp = server, smtp
        self.url = server.database_url
        self.ann_token = _add_user(self.url, "ann")
        self.bea_token = _add_user(self.url, "bea", email="bea@example.com", group="baristas")

    def api(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url, timeout=30, headers={"Authorization": f"Token {token}"}
        )

    def until(self, what: str, sql: str, *args: object) -> list[tuple]:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            rows = query(self.url, sql, *args)
            if rows:
                return rows
            time.sleep(0.05)
        turns = query(self.url, "SELECT id, status, attempts, worker_id FROM turns_turn")
        slots = query(self.url, "SELECT turn_id, slot_id, renderer, status FROM turns_turnslot")
        raise AssertionError(
            f"never happened: {what}\nturns {turns}\nslots {slots}\n{self.server.worker_logs()}"
        )

    def open_slot(self, session_id: str, renderer: str) -> tuple[int, str, str, str]:
        """(turn id, slot id, turn status, worker id) once the turn waits on that slot."""
        return self.until(
            f"a {renderer} slot waits",
            "SELECT t.id, s.slot_id, t.status, t.worker_id FROM turns_turnslot s "
            "JOIN turns_turn t ON t.id = s.turn_id WHERE s.session_id = %s AND s.renderer = %s "
            "AND s.status = 'open' AND t.status IN ('running', 'waiting')",
            session_id,
            renderer,
        )[0]

    def worker_of(self, worker_id: str):
        pid = int(worker_id.split(":")[1])
        return next(worker for worker in self.server.workers if worker.pid == pid)

    def turn(self, turn_id: int) -> tuple:
        return query(
            self.url,
            "SELECT status, attempts, resumes, worker_id FROM turns_turn WHERE id = %s",
            turn_id,
        )[0]


@pytest.fixture(scope="module")
def shared_stack(postgres, pgbouncer) -> Iterator[Stack]:
    """One server (and SMTP server) for the module, through PgBouncer; each test starts its
    own workers."""
    with SmtpServer() as smtp:
        env = {
            "GLOVE_TASKS_BACKEND": "db",
            "REDIS_URL": "",
            "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
            # Three faults on one turn, each at a wait on a person: none spends an attempt,
            # so the default limit holds (it gave up at the third, the barista's approval
            # decided and no order placed).
            "GLOVE_TURN_MAX_ATTEMPTS": "3",
            "GLOVE_TURN_DB_THREADS": "2",
            "GLOVE_APPROVAL_SWEEP_SECONDS": "0.2",
            "GLOVE_PUBLIC_URL": "http://testserver",
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(smtp.port),
        }
        server = LiveServer(database_url=postgres.url(), extra_env=env)
        with through_pgbouncer(server, pgbouncer):
            yield Stack(server, smtp)


@pytest.fixture
def waits_stack(request, shared_stack) -> Iterator[Stack]:
    """Two workers that park a turn after `param` seconds (60 by default: the faults hit a
    turn that waits while running)."""
    stack = shared_stack
    stack.smtp.received.clear()
    # Each test orders 6 bags of the shared shop's Colombia: enough on the shelf for it.
    query(stack.url, "UPDATE agents_coffee SET stock = 50 WHERE name = %s RETURNING sku", COFFEE)
    park_after = {"GLOVE_TURN_PARK_AFTER_SECONDS": getattr(request, "param", "60")}
    stack.server.env.update(park_after)  # and for the workers a test starts itself
    stack.server.start_worker()
    stack.server.start_worker()
    yield stack
    for worker in stack.server.workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGCONT)
            worker.kill()
            worker.wait()
    stack.server.workers.clear()


def _checkout(stack: Stack, break_it) -> None:
    """The checkout of 6 bags with the saved card; `break_it(stack, turn_id, worker_id)` at
    each of its three waits, before the person answers."""
    ann = Browser(stack.server)
    session_id = ann.new_session()
    assert (
        ann.post(f"/sessions/{session_id}/messages", {"text": "add 6 Colombia"}).status_code == 303
    )
    stack.until(
        "the bags are in the cart",
        "SELECT 1 FROM turns_turn WHERE session_id = %s AND status = 'done'",
        session_id,
    )
    assert ann.post(f"/sessions/{session_id}/messages", {"text": "checkout"}).status_code == 303

    # 1. The customer's permission prompt (saved card), answered over REST.
    turn_id, slot_id, _, worker_id = stack.open_slot(session_id, "permission_request")
    break_it(stack, turn_id, worker_id)
    prompts = stack.api(stack.ann_token).get(f"/api/sessions/{session_id}/permission-prompts")
    assert [prompt["id"] for prompt in prompts.json()] == [f"t{turn_id}-{slot_id}"], prompts.text
    answered = stack.api(stack.ann_token).post(
        f"/api/sessions/{session_id}/permission-prompts/t{turn_id}-{slot_id}",
        json={"decision": "approve"},
    )
    assert answered.status_code == 200, answered.text

    # 2. The barista's approval: one e-mail, decided over REST after the fault.
    same_turn, _, _, worker_id = stack.open_slot(session_id, "approval_request")
    [(request_id, fingerprint)] = query(
        stack.url,
        "SELECT id, fingerprint FROM approvals_approvalrequest WHERE session_id = %s",
        session_id,
    )
    assert same_turn == turn_id
    assert len(stack.smtp.wait_for(1)) == 1
    # Broken once the e-mail is recorded as sent: a worker killed between the SMTP server's
    # 250 and that record sends it again, with the same Message-ID (the documented window,
    # gloveapp/approvals/notifications.py), which is not the wait this test is about.
    stack.until(
        "the e-mail is recorded as sent",
        "SELECT 1 FROM approvals_approvalnotification WHERE request_id = %s AND status = 'sent'",
        request_id,
    )
    break_it(stack, turn_id, worker_id)
    decided = stack.api(stack.bea_token).post(
        f"/api/approvals/{request_id}/decide",
        json={"decision": "approve", "fingerprint": fingerprint},
    )
    assert decided.status_code == 200, decided.text

    # 3. The customer's "Confirm your order" slot, answered on the page.
    _, confirm_slot, _, worker_id = stack.open_slot(session_id, "checkout")
    break_it(stack, turn_id, worker_id)
    confirmed = ann.post(
        f"/sessions/{session_id}/slots/t{turn_id}-{confirm_slot}", {"value": "confirm"}
    )
    assert confirmed.status_code == 303, confirmed.text

    stack.until(
        "the checkout turn is done",
        "SELECT 1 FROM turns_turn WHERE id = %s AND status = 'done'",
        turn_id,
    )
    time.sleep(1)  # a second order, or a second e-mail, would be there by now

    orders = query(stack.url, "SELECT count(*) FROM agents_order WHERE session_id = %s", session_id)
    slots = query(
        stack.url,
        "SELECT renderer, status FROM turns_turnslot WHERE turn_id = %s ORDER BY id",
        turn_id,
    )
    requests = query(
        stack.url,
        "SELECT status, decision FROM approvals_approvalrequest WHERE session_id = %s",
        session_id,
    )
    events = [
        kind
        for (kind,) in query(
            stack.url,
            "SELECT type FROM conversations_liveevent WHERE stream = %s ORDER BY id",
            f"session:{session_id}",
        )
    ]
    page = ann.client.get(f"/sessions/{session_id}/").text
    print(f"\nturn {stack.turn(turn_id)}; events {events}")
    assert orders == [(1,)]
    assert slots == [
        ("permission_request", "resolved"),
        ("approval_request", "resolved"),
        ("checkout", "resolved"),
    ]
    assert requests == [("decided", "approve")]
    assert [mail.to for mail in stack.smtp.received] == [["bea@example.com"]]
    assert events[-1] == "turn.finished"
    assert "Order #" in page
    assert "That didn't work" not in page
    # The conversation holds the checkout call once, with one result.
    rows = query(
        stack.url,
        "SELECT tool_calls, tool_results FROM conversations_message WHERE session_id = %s",
        session_id,
    )
    calls = [call["tool_name"] for calls, _ in rows for call in calls or []]
    results = [result["result"]["status"] for _, results in rows for result in results or []]
    assert calls.count("checkout") == 1
    assert results.count("success") == len(results) == len(calls)


def _kill_and_restart(stack: Stack, turn_id: int, worker_id: str) -> None:
    victim = stack.worker_of(worker_id)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    stack.server.start_worker()
    # Taken back after the lease and run again by a live worker, its wait found again.
    stack.until(
        "another worker runs the turn again",
        "SELECT 1 FROM turns_turn WHERE id = %s AND status = 'running' AND worker_id <> %s",
        turn_id,
        worker_id,
    )


def _freeze_past_the_lease(stack: Stack, turn_id: int, worker_id: str) -> None:
    frozen = stack.worker_of(worker_id)
    frozen.send_signal(signal.SIGSTOP)
    try:
        stack.until(
            "the other worker takes the turn back",
            "SELECT 1 FROM turns_turn WHERE id = %s AND status = 'running' AND worker_id <> %s",
            turn_id,
            worker_id,
        )
    finally:
        frozen.send_signal(signal.SIGCONT)


def _restart_everything_while_parked(stack: Stack, turn_id: int, worker_id: str) -> None:
    stack.until(
        "the turn parks",
        "SELECT 1 FROM turns_turn WHERE id = %s AND status = 'waiting' AND worker_id = ''",
        turn_id,
    )
    for worker in list(stack.server.workers):
        if worker.poll() is None:
            worker.send_signal(signal.SIGKILL)
            worker.wait()
    stack.server.start_worker()
    stack.server.start_worker()


def test_a_killed_worker_loses_no_wait_of_a_checkout(waits_stack):
    _checkout(waits_stack, _kill_and_restart)


def test_a_worker_frozen_past_its_lease_loses_no_wait_of_a_checkout(waits_stack):
    _checkout(waits_stack, _freeze_past_the_lease)
    # The frozen workers came back and went on serving; none of them ran a stale attempt on.
    assert all(worker.poll() is None for worker in waits_stack.server.workers)


@pytest.mark.parametrize("waits_stack", ["0"], indirect=True)
def test_a_parked_checkout_survives_a_restart_of_every_worker(waits_stack):
    _checkout(waits_stack, _restart_everything_while_parked)
