"""One lock order for a session's writes: its row, then its stream's advisory lock.

A turn's end took its session's stream lock (its events) and, at commit, its session's row
(the foreign-key checks of its usage and steps, deferred to the commit); an append takes the
row, then the stream lock: each held what the other waited for, and PostgreSQL ended one as
a deadlock. Here the turn's end is held after its session's events (a third connection holds
the approvals' stream lock it takes next) while an append starts, then let go: both commit.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.utils import timezone

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.conversations.models import Message
from gloveapp.conversations.services import messages_append, session_create
from gloveapp.core.types import Message as CoreMessage
from gloveapp.live.outbox import stream_lock_key
from gloveapp.live.streams import approvals_stream
from gloveapp.observe.cost import Usage
from gloveapp.turns import claim, lifecycle, submit
from gloveapp.turns.models import Turn, TurnSlot, TurnStep

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _dsn() -> str:
    params = connection.get_connection_params()
    return psycopg.conninfo.make_conninfo(
        **{key: value for key, value in params.items() if key in {"dbname", "host", "port", "user"}}
    )


def _waiting(admin: psycopg.Connection, count: int) -> bool:
    """Whether `count` backends wait on a lock (the two writers, held)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        waiting = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database()"
        ).fetchone()[0]
        if waiting >= count:
            return True
        time.sleep(0.05)
    return False


def _in_thread(outcomes: dict, name: str, work) -> threading.Thread:
    def run() -> None:
        try:
            outcomes[name] = work()
        except Exception as error:
            outcomes[name] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


def test_a_turns_end_and_an_append_to_its_session_do_not_deadlock():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row and advisory locks")
    owner = get_user_model().objects.create_user("lock-order")
    session = session_create(owner=owner, agent_name="coffee")
    submit.turn_submit(session_id=session.pk, text="hello", user_id=owner.pk)
    turn = claim.turn_claim_next(session_id=session.pk, worker_id="worker-a")
    step = TurnStep.objects.get(turn_id=turn.pk, kind="attempt")
    # The turn ends with a prompt still open (its end expires it: an event on the session's
    # stream) and an approval request still open (withdrawn: an event on the approvals').
    TurnSlot.objects.create(
        turn=turn,
        session=session,
        slot_id="s1",
        renderer="confirm",
        template="t",
        waits_for_answer=True,
    )
    ApprovalRequest.objects.create(
        session=session,
        turn_id=turn.pk,
        slot_id="s2",
        tool_name="checkout",
        args={},
        fingerprint="f",
        decisions=["approve", "reject"],
        created_at=timezone.now(),
    )
    outcomes: dict = {}

    with psycopg.connect(_dsn(), autocommit=True) as admin, psycopg.connect(_dsn()) as holder:
        # The turn's end stops at the approvals' stream, its session's events written.
        holder.execute("SELECT pg_advisory_xact_lock(%s)", [stream_lock_key(approvals_stream())])
        finishing = _in_thread(
            outcomes,
            "finish",
            lambda: lifecycle.turn_finish(
                turn_id=turn.pk,
                worker_id="worker-a",
                status=Turn.Status.DONE,
                reply="Done.",
                model="scripted",
                usage=Usage(tokens_in=10, tokens_out=5),
                attempt=1,
                started_at=step.started_at,
            ),
        )
        assert _waiting(admin, 1), "the turn's end did not reach the approvals' stream"
        appending = _in_thread(
            outcomes,
            "append",
            lambda: messages_append(
                session_id=session.pk, messages=[CoreMessage(sender="user", text="and a muffin")]
            ),
        )
        assert _waiting(admin, 2), "the append did not wait"
        holder.commit()  # let the turn's end go on
        finishing.join(60)
        appending.join(60)

    assert outcomes["finish"] is True, outcomes
    assert not isinstance(outcomes["append"], Exception), outcomes
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.DONE
    assert Message.objects.filter(session_id=session.pk, text="and a muffin").count() == 1
