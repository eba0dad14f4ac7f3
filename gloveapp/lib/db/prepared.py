"""The hot statements as prepared statements on PostgreSQL.

Django sends every query with client-side binding, so PostgreSQL parses and plans each one
anew. For the append's one statement (`conversations.append`) planning took longer than
running it (EXPLAIN ANALYZE: 1.0 ms planning, 0.5 ms execution), and every POST, GET and
turn pays for its statements that way. The few statements every request or turn runs go
through `prepared_cursor()` instead: on PostgreSQL a cursor with server-side binding whose
statements are prepared on first use and then only executed, per connection (psycopg keeps
up to `prepared_max` of them per connection, 100 by default). It is still Django's cursor
wrapper around it, so queries are logged and counted, execute wrappers run and errors are
Django's.

Elsewhere (SQLite), or with GLOVE_PREPARED_STATEMENTS off, it is Django's own cursor: a
transaction-pooling PgBouncer before 1.21 cannot keep prepared statements across the
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections


@contextmanager
def prepared_cursor(using: str = DEFAULT_DB_ALIAS) -> Iterator[Any]:
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and settings.GLOVE_PREPARED_STATEMENTS:
            from django.db.backends.postgresql.base import ServerBindingCursor

            raw = connection.connection
            if raw.prepare_threshold is None:  # Django's default: psycopg never prepares
                # Only server-side binding cursors prepare, and only this module makes them
                # (unless OPTIONS turns server_side_binding on for every query).
                raw.prepare_threshold = 0
            client, cursor.cursor = cursor.cursor, ServerBindingCursor(raw)
            client.close()
        yield cursor


def sql_datetime(value: datetime, using: str = DEFAULT_DB_ALIAS) -> Any:
    """A datetime as a raw statement's parameter, stored as the ORM stores it (SQLite keeps
    naive UTC text: an aware value passed as is would be text with an offset that equals no
    value the ORM compares it with)."""
    return connections[using].ops.adapt_datetimefield_value(value)
