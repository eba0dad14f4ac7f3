"""A statement's answer, waited for at most GLOVE_DB_WAIT_SECONDS."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from django.conf import settings

logger = logging.getLogger("gloveapp.lib.db")

# The server's statement_timeout cancels a slow statement; a frozen server (SIGSTOP, a hung
# host, a cut network that still ACKs) cancels nothing, and the client would wait on its
# socket for ever. So every statement a Django connection runs is watched: past the wait, one
# thread shuts the connection's socket down, the waiting call fails at once with an
# OperationalError (a 503 with Retry-After for a request, an outage for a loop), and the
# connection is discarded. Armed and disarmed per statement under one lock: about a
# microsecond, no thread or timer per statement.


class _StatementWatch:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._watched: dict[int, tuple[float, Any]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def arm(self, raw: Any, seconds: float) -> int:
        with self._lock:
            self._next += 1
            token = self._next
            self._watched[token] = (time.monotonic() + seconds, raw)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="glove-statement-watch", daemon=True
                )
                self._thread.start()
            elif len(self._watched) == 1:
                self._lock.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._lock:
            self._watched.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._watched:
                    self._lock.wait()
                    continue
                now = time.monotonic()
                due = [(t, raw) for t, (at, raw) in self._watched.items() if at <= now]
                for token, _ in due:
                    del self._watched[token]
                if not due:
                    soonest = min(at for at, _ in self._watched.values())
                    self._lock.wait(min(soonest - now, 1.0))
                    continue
            for _, raw in due:
                _cut(raw)


def _cut(raw: Any) -> None:
    """Shut a psycopg connection's socket down (not closed: its owner closes it), so the
    thread blocked on it wakes with an error."""
    import socket

    with suppress(Exception):
        fd = raw.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
    logger.warning(
        "a statement got no answer within GLOVE_DB_WAIT_SECONDS (%s s): its connection was cut",
        settings.GLOVE_DB_WAIT_SECONDS,
    )


_watch = _StatementWatch()


def _bounded_execute(execute: Callable, sql: Any, params: Any, many: bool, context: dict) -> Any:
    seconds = settings.GLOVE_DB_WAIT_SECONDS
    raw = context["connection"].connection
    if not seconds or raw is None:
        return execute(sql, params, many, context)
    token = _watch.arm(raw, seconds)
    try:
        return execute(sql, params, many, context)
    finally:
        _watch.disarm(token)


def bound_statement_waits(sender: Any, connection: Any, **kwargs: Any) -> None:
    """`connection_created` receiver: every statement of a PostgreSQL connection is watched
    (once per connection object, which lives as long as its thread)."""
    if connection.vendor != "postgresql" or not settings.GLOVE_DB_WAIT_SECONDS:
        return
    if _bounded_execute not in connection.execute_wrappers:
        connection.execute_wrappers.append(_bounded_execute)
