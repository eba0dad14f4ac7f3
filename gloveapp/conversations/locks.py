"""The one lock order of a session's writes: the session's row, then its stream's lock.

An append takes the session's row (FOR UPDATE) and then, on PostgreSQL, the advisory lock
that keeps the stream's event ids in commit order (`live.outbox.before_event_insert`), in
one statement (`append.postgresql_statement`). A transaction that records events on a
session's stream and writes the session too (a turn's end: its usage, the results of its
open calls; the inbox's injection: the items' events, then their banner) takes the row
first, with `session_lock`, before any event: taken the other way round, it and an append
each held the lock the other waited for (PostgreSQL ended one of them as a deadlock).
"""

from __future__ import annotations

from django.db import transaction

from gloveapp.conversations.models import Session
from gloveapp.lib.db.prepared import prepared_cursor

_LOCK_SQL = f'SELECT 1 FROM "{Session._meta.db_table}" WHERE "id" = %s FOR UPDATE'


def session_lock(session_id: str) -> None:
    """Hold the session's row until the caller's transaction ends, as an append would
    (unlike `services.lock_session`, it neither reads nor creates the row):
    call it inside the transaction, before anything that records an event on the
    session's stream. (SQLite's transactions begin IMMEDIATE: its writers are serial.)"""
    if transaction.get_connection().vendor != "postgresql":
        return
    with prepared_cursor() as cursor:
        cursor.execute(_LOCK_SQL, [session_id])
