"""The Django task behind every chat turn, and how it is enqueued.

A posted message is a queued `Turn` row; its task only says "this session may have a turn
to run". Whatever worker the backend hands the task to claims the turn in the database (one
running turn per session), so a task that runs twice, late, or on the wrong worker is
harmless, and the turn itself never runs twice or out of order.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from django.db import transaction
from django.tasks import task

from gloveapp.lib.logs import OutageLog
from gloveapp.turns.engine import TurnEngine, current_engine
from gloveapp.turns.parking import turn_unpark
from gloveapp.turns.wakeups import task_enqueued_notify

logger = logging.getLogger(__name__)
QUEUE_OUTAGE = OutageLog(logger, "the task queue")


@task
def run_session_turns(session_id: str) -> None:
    engine = current_engine()
    if engine is not None:
        # Inside `turn_worker`: hand the session to its event loop, which runs many turns
        # at once, and take the next task.
        engine.dispatch(session_id)
    else:
        # A plain backend worker (`db_worker`, `rqworker`): run the session's turns here.
        run_session_blocking(session_id)


def run_session_blocking(session_id: str) -> None:
    """Run a session's queued turns to the end in this thread (a plain backend worker)."""
    asyncio.run(TurnEngine(requeue=enqueue_session).run_session(session_id))


def enqueue_session(session_id: str) -> bool:
    """Enqueue the session's task (call after its turn is committed); False when the task
    backend refused (Redis frozen or gone, for RQ): the turn stays queued in the database,
    and a worker's sweep (`leases.sessions_waiting`) enqueues it again once the backend
    answers. A message is never refused, nor a request held up, for want of the queue."""
    try:
        result = run_session_turns.enqueue(session_id)
        if type(result.task.get_backend()).__module__.startswith("django_tasks_db"):
            task_enqueued_notify()
    except Exception as error:
        # One line per outage, not a traceback per accepted message (gloveapp/lib/logs.py).
        QUEUE_OUTAGE.failed(error, "turns stay queued in the database until a worker's sweep")
        return False
    QUEUE_OUTAGE.answered()
    return True


def wake_turn(turn_id: int) -> None:
    """`gloveapp.lib.turn_waking.wake_turn` for the turns (set by `TurnsConfig.ready`): in the caller's
    transaction, a turn parked on a person goes back on the queue and its session's task is
    enqueued when that transaction commits (a lost task: the sweep enqueues it again)."""
    session_id = turn_unpark(turn_id=turn_id)
    if session_id is not None:
        transaction.on_commit(partial(enqueue_session, session_id), robust=True)
