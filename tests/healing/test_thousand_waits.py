"""A thousand customers waiting on a person need no thousand worker slots (issue 34).

Two `turn_worker` processes of 8 turns each run 1,000 coffee-demo checkouts; each waits on
its customer's "Confirm your order" and parks (GLOVE_TURN_PARK_AFTER_SECONDS = 0): no
worker, no lease, no slot. Meanwhile other chats are answered, and a checkout confirmed
later goes on, once, on whichever worker takes it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.api.liveserver import PYTHON, ROOT, LiveServer, add_user
from tests.healing.stack import PASSWORD, Browser, query
from tests.servers import through_pgbouncer

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600)]

WAITING = 1000
CONCURRENCY = 8
WAIT = 420.0

# Run in the server's own environment: 1,000 chats with a bag in the cart, each asked to
# check out. The rows are those the services write for a page post (a chat, its cart line,
# its queued turn), written in bulk: one by one through the services (four transactions a
# chat) this setup was most of the test's time. Then each chat's task is enqueued, after
# the commit, as a post enqueues its own.
_SETUP = f"""
from django.contrib.auth import get_user_model
from django.db import transaction
from gloveapp.conversations.models import Session
from gloveapp.conversations.services import new_session_id
from gloveapp.demo import shop
from gloveapp.demo.models import CartLine
from gloveapp.turns.models import Turn
from gloveapp.turns.queue.tasks import enqueue_session
ann = get_user_model().objects.get(username="ann")
coffee = shop.coffee_find("Colombia Huila")
ids = [new_session_id() for _ in range({WAITING})]
with transaction.atomic():
    Session.objects.bulk_create(
        Session(id=id_, key=id_, owner=ann, agent_name="coffee", title=f"waits {{n}}")
        for n, id_ in enumerate(ids)
    )
    CartLine.objects.bulk_create(CartLine(session_id=id_, coffee=coffee) for id_ in ids)
    Turn.objects.bulk_create(
        Turn(session_id=id_, text="checkout, pay at pickup", source="python") for id_ in ids
    )
with transaction.atomic():
    for id_ in ids:
        enqueue_session(id_)
"""


@pytest.fixture
def crowd(postgres, pgbouncer) -> Iterator[LiveServer]:
    env = {
        "GLOVE_TASKS_BACKEND": "db",
        "REDIS_URL": "",
        "GLOVE_TURN_CONCURRENCY": str(CONCURRENCY),
        "GLOVE_TURN_DB_THREADS": "2",
        "GLOVE_TURN_PARK_AFTER_SECONDS": "0",
        "GLOVE_TURNS_PER_USER_PER_MINUTE": "100000",
    }
    server = through_pgbouncer(LiveServer(database_url=postgres.url(), extra_env=env), pgbouncer)
    with server:
        add_user(server.database_url, "ann", PASSWORD)
        server.start_worker()
        server.start_worker()
        yield server


def _until(server: LiveServer, what: str, sql: str, *args: object) -> list[tuple]:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        rows = query(server.database_url, sql, *args)
        if rows:
            return rows
        time.sleep(0.2)
    states = query(server.database_url, "SELECT status, count(*) FROM turns_turn GROUP BY 1")
    raise AssertionError(f"never happened: {what}; turns {states}\n{server.worker_logs()}")


def test_a_thousand_parked_checkouts_leave_the_workers_free_for_other_chats(crowd):
    server = crowd
    started = time.monotonic()
    subprocess.run(
        [PYTHON, "manage.py", "shell", "-c", _SETUP], cwd=ROOT, env=server.env, check=True
    )
    queued_in = time.monotonic() - started
    _until(
        server,
        f"{WAITING} checkouts park",
        "SELECT 1 FROM turns_turn WHERE status = 'waiting' HAVING count(*) = %s",
        WAITING,
    )
    parked_in = time.monotonic() - started

    # Other chats are answered while the thousand wait.
    ann = Browser(server)
    others = [ann.new_session() for _ in range(3)]
    for session_id in others:
        assert (
            ann.post(f"/sessions/{session_id}/messages", {"text": "show me the menu"}).status_code
            == 303
        )
    _until(
        server,
        "the other chats are answered",
        "SELECT 1 FROM turns_turn WHERE session_id = ANY(%s) AND status = 'done' "
        "HAVING count(*) = %s",
        others,
        len(others),
    )
    held = query(
        server.database_url,
        "SELECT count(*) FROM turns_turn WHERE status = 'waiting' AND worker_id = '' "
        "AND lease_until IS NULL",
    )

    # A customer confirms: that checkout goes on, once, and the rest still wait.
    [(turn_id, session_id, slot_id)] = query(
        server.database_url,
        "SELECT t.id, t.session_id, s.slot_id FROM turns_turn t JOIN turns_turnslot s "
        "ON s.turn_id = t.id WHERE t.status = 'waiting' ORDER BY t.id LIMIT 1",
    )
    confirmed = ann.post(f"/sessions/{session_id}/slots/t{turn_id}-{slot_id}", {"value": "confirm"})
    _until(
        server,
        "the confirmed checkout ends",
        "SELECT 1 FROM turns_turn WHERE id = %s AND status = 'done'",
        turn_id,
    )
    orders = query(
        server.database_url, "SELECT count(*) FROM agents_order WHERE session_id = %s", session_id
    )
    waiting = query(server.database_url, "SELECT count(*) FROM turns_turn WHERE status = 'waiting'")
    print(
        f"\n{WAITING} checkouts queued in {queued_in:.1f} s, all parked "
        f"{parked_in:.1f} s after the start, on 2 workers of {CONCURRENCY} turns each"
    )
    assert held == [(WAITING,)]
    assert confirmed.status_code == 303
    assert orders == [(1,)]
    assert waiting == [(WAITING - 1,)]
