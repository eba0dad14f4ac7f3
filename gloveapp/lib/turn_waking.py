"""The hook that wakes a turn when something it waits on is stored: the approvals and the
conversations call `wake_turn` without importing the turns, which set what it does."""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from gloveapp.lib.wake import TURNS, wake_after_commit

# PostgreSQL NOTIFY channel the turn workers LISTEN on: "<turn id>" when something a running
# turn waits for (a prompt's answer, an approval's decision, a stop) was stored.
TURNS_CHANNEL = "glove_turns"


def notify_turn_worker(turn_id: int) -> None:
    """Tell the worker running the turn to look now: NOTIFY on PostgreSQL, delivered when the
    current transaction commits and dropped if it rolls back; on SQLite a local wake-up."""
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [TURNS_CHANNEL, str(turn_id)])
    else:
        # SQLite: a datagram to the workers of this machine, after commit (gloveapp.lib.wake).
        wake_after_commit(TURNS, str(turn_id))


# The turns app sets this (`TurnsConfig.ready`): what an answer does to the turn it answers.
_turn_waker: Callable[[int], None] | None = None


def set_turn_waker(waker: Callable[[int], None] | None) -> None:
    global _turn_waker
    _turn_waker = waker


def wake_turn(turn_id: int) -> None:
    """Something the turn waits on was answered (a prompt, a decision, a stop), in the
    caller's transaction: a turn parked on a person goes back on the queue in it (its task
    is enqueued at commit), a running one's worker is told to look. The approvals call this
    without importing the turns (the turns app sets what it does)."""
    if _turn_waker is not None:
        _turn_waker(turn_id)
    else:
        notify_turn_worker(turn_id)
