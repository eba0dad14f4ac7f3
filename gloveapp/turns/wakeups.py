"""Waking the turn workers: the PostgreSQL NOTIFY channel they LISTEN on (a local wake-up on
SQLite, `gloveapp.lib.wake`), and the word that says a task waits on the database queue."""

from __future__ import annotations

from django.db import transaction

from gloveapp.lib import turn_waking
from gloveapp.lib.wake import TURNS as WAKE_TURNS
from gloveapp.lib.wake import wake_after_commit

# PostgreSQL NOTIFY channel (`gloveapp.lib.db`): "<turn id>" when a prompt of that turn is
# answered, an approval decided or a stop asked for; the worker running it LISTENs
# (`TurnEngine`), and polls only as a safety net.
TURNS_CHANNEL = turn_waking.TURNS_CHANNEL
# ... and this payload when a task was enqueued on the database queue: idle workers take it
# at once instead of polling the task table every few milliseconds.
TASK_ENQUEUED = "task"


def task_enqueued_notify() -> None:
    """Tell idle workers a task waits on the database queue: NOTIFY on PostgreSQL, a local
    wake-up on SQLite (`gloveapp.lib.wake`). Sent at once outside a transaction, at commit
    inside one."""
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [TURNS_CHANNEL, TASK_ENQUEUED])
    else:
        wake_after_commit(WAKE_TURNS, TASK_ENQUEUED)
