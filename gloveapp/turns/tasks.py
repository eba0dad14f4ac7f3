"""The Django task behind every chat turn.

A posted message is a queued `Turn` row; its task only says "this session may have a turn
to run". Whatever worker the backend hands the task to claims the turn in the database (one
running turn per session), so a task that runs twice, late, or on the wrong worker is
harmless, and the turn itself never runs twice or out of order.
"""

from __future__ import annotations

from django.tasks import task


@task
def run_session_turns(session_id: str) -> None:
    from gloveapp.turns.engine import current_engine, run_session_blocking

    engine = current_engine()
    if engine is not None:
        # Inside `turn_worker`: hand the session to its event loop, which runs many turns
        # at once, and take the next task.
        engine.dispatch(session_id)
    else:
        # A plain backend worker (`db_worker`, `rqworker`): run the session's turns here.
        run_session_blocking(session_id)


def enqueue_session(session_id: str) -> None:
    """Enqueue the task after the surrounding transaction commits (call from sync code)."""
    from django.db import transaction

    transaction.on_commit(lambda: run_session_turns.enqueue(session_id))
