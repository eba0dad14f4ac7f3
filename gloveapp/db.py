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
server connections it hands out.

And the one rule for a database that goes away (a restart, a failover, a network cut) under
a loop that outlives a request (the turn worker's claim loop, watcher and NOTIFY listener,
the task fetchers, the live relay, the database mesh transport, `run_agent`): the error is
recognised (`is_database_outage`), the broken connection is closed in the thread that
holds it (`close_broken_connections`, or `healing(func)` around the function a thread
runs), so the next call opens a new one, and the loop waits with a bounded exponential
`Backoff` before it tries again. The process logs one line when the database goes away
and one when it is back, not a traceback per attempt. Django reconnects by itself only at
a request's start and end; a loop has no requests.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.utils import InterfaceError, OperationalError

from gloveapp.observe import metrics
from gloveapp.wake import TURNS, wake_after_commit

logger = logging.getLogger("gloveapp.db")


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
        # SQLite: a datagram to the workers of this machine, after commit (gloveapp.wake).
        wake_after_commit(TURNS, str(turn_id))


# -- retention --------------------------------------------------------------------------------
def delete_in_batches(queryset: Any, *, batch: int | None = None) -> int:
    """Delete `queryset`'s rows a batch at a time, each batch its own short transaction;
    returns how many rows of the queryset's model went.

    One `DELETE` of a million rows holds its locks and its transaction (and keeps every dead
    row from being vacuumed) until it ends; batches of GLOVE_RETENTION_BATCH primary keys
    let writers and vacuum in between, and stop as soon as a batch comes back short.
    Cascades and SET NULLs run per batch, as Django's `delete()` does them."""
    size = batch or settings.GLOVE_RETENTION_BATCH
    model = queryset.model
    deleted = 0
    while True:
        with transaction.atomic(using=queryset.db):
            pks = list(queryset.order_by().values_list("pk", flat=True)[:size])
            if not pks:
                break
            _, per_model = model._base_manager.using(queryset.db).filter(pk__in=pks).delete()
        deleted += per_model.get(model._meta.label, 0)
        if len(pks) < size:
            break
    return deleted


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


# -- when the database goes away ------------------------------------------------------------
# Bounded: once the database is back, every loop notices within BACKOFF_MAX_SECONDS.
BACKOFF_FIRST_SECONDS = 0.1
BACKOFF_MAX_SECONDS = 2.0


def _outage_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OperationalError, InterfaceError]
    with suppress(ImportError):  # psycopg's own, from connections Django does not wrap
        import psycopg

        errors += [psycopg.OperationalError, psycopg.InterfaceError]
    return tuple(errors)


def is_database_outage(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) says the database could not be reached or the
    connection broke: OperationalError and InterfaceError (a bad statement raises others)."""
    errors = _outage_errors()
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, errors):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def close_broken_connections() -> None:
    """Close this thread's connections that failed or broke; the next query opens a new one
    (with a pool, the broken one is discarded). Call it in the thread that holds them."""
    for connection in connections.all(initialized_only=True):
        raw = connection.connection
        if raw is None or connection.in_atomic_block:
            continue
        if connection.errors_occurred or getattr(raw, "closed", False):
            with suppress(Exception):
                connection.close()


def pool_check(raw: Any) -> None:
    """psycopg's pool runs this before it hands out a connection (settings.py): one that
    has something to read while idle was closed by the server (a restart, a failover, an
    idle timeout; its last words wait in the socket) and is replaced, instead of failing the
    request that takes it. A non-blocking poll (about 1 µs), not a round trip."""
    import select

    import psycopg

    readable, _, _ = select.select([raw.pgconn.socket], [], [], 0)
    if readable:
        # Closed here: the pool takes back what failed its check, and discards only what
        # it sees closed (psycopg cannot tell this one is dead).
        raw.close()
        raise psycopg.OperationalError("the server closed this idle connection")


def close_dead_idle_connections() -> None:
    """Close this thread's idle PostgreSQL connections that the server closed meanwhile (a
    restart, a failover): the next query opens a new one instead of failing on the old.

    A thread a loop keeps (sync_to_async's) holds its connection for its whole life, out of
    the pool's reach, so `pool_check` never sees it: the first write after a restart would
    fail, and a mesh message arriving then was lost. The same non-blocking poll: an idle
    connection with something to read holds the server's last words. (These connections
    never LISTEN: the listeners have connections of their own.)"""
    import select

    for connection in connections.all(initialized_only=True):
        raw = connection.connection
        if raw is None or connection.in_atomic_block or connection.vendor != "postgresql":
            continue
        try:
            readable, _, _ = select.select([raw.pgconn.socket], [], [], 0)
        except Exception:  # already closed: no socket
            readable = True
        if readable:
            with suppress(Exception):
                connection.close()


def healing[**P, T](func: Callable[P, T]) -> Callable[P, T]:
    """`func`, on a connection the server has not closed meanwhile, closing its thread's
    broken connections when it fails for want of the database (the error is raised as it
    was): for the functions a loop hands to a thread."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        close_dead_idle_connections()
        try:
            return func(*args, **kwargs)
        except Exception as error:
            if is_database_outage(error):
                close_broken_connections()
            raise

    return call


class _Outage:
    """The process's view: the first loop to fail says so, the first to succeed after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.since: float | None = None

    def down(self, label: str, error: BaseException) -> None:
        with self._lock:
            if self.since is not None:
                return
            self.since = time.monotonic()
        logger.warning(
            "the database is unreachable (%s, in %s): retrying every %s s at most until it is back",
            _one_line(error),
            label,
            BACKOFF_MAX_SECONDS,
        )

    def up(self, label: str) -> None:
        with self._lock:
            if self.since is None:
                return
            away, self.since = time.monotonic() - self.since, None
        metrics.database_reconnected()
        logger.warning("the database is back (after %.1f s, seen by %s)", away, label)


_outage = _Outage()


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text[:200]}"


class Backoff:
    """One loop's retries while the database is away: `failed(error)` returns how long to
    wait (0.1 s doubling up to BACKOFF_MAX_SECONDS) and logs an outage once per process; an
    error that is no outage is logged with its traceback, as a bug. `succeeded()` resets it
    and logs the database's return once."""

    def __init__(self, label: str, *, log: logging.Logger | None = None) -> None:
        self.label = label
        self.failures = 0
        self._log = log or logger

    def failed(self, error: BaseException) -> float:
        self.failures += 1
        if is_database_outage(error):
            _outage.down(self.label, error)
        else:
            self._log.error("%s failed", self.label, exc_info=error)
        return min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** (self.failures - 1))

    def succeeded(self) -> None:
        if self.failures:
            self.failures = 0
            _outage.up(self.label)


async def retry_while_unreachable[T](
    label: str,
    call: Callable[[], Awaitable[T]],
    *,
    stopping: Callable[[], bool] = lambda: False,
) -> T:
    """`await call()`, again after a backoff as long as it fails for want of the database
    (and the caller is not stopping); any other error is raised at once. `call` must close
    its broken connections itself (`healing`)."""
    backoff = Backoff(label)
    while True:
        try:
            result = await call()
        except Exception as error:
            if not is_database_outage(error) or stopping():
                raise
            await asyncio.sleep(backoff.failed(error))
        else:
            backoff.succeeded()
            return result


# -- a statement's answer, waited for at most GLOVE_DB_WAIT_SECONDS -------------------------
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


def add_index_if_absent(app_label: str, model_name: str, index: Any) -> Any:
    """A migration operation adding `index` (the models' state: an `AddIndex`) that skips
    an index of that name already built: on PostgreSQL `CREATE INDEX IF NOT EXISTS`, so on
    a large table it may be built beforehand without blocking writes (`CREATE INDEX
    CONCURRENTLY` under the same name, docs/howto/deploy.md); elsewhere a plain one."""
    from django.db import migrations

    def create(apps: Any, schema_editor: Any) -> None:
        model = apps.get_model(app_label, model_name)
        if schema_editor.connection.vendor != "postgresql":
            schema_editor.add_index(model, index)
            return
        sql = str(index.create_sql(model, schema_editor))
        schema_editor.execute(sql.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))

    def drop(apps: Any, schema_editor: Any) -> None:
        schema_editor.remove_index(apps.get_model(app_label, model_name), index)

    return migrations.SeparateDatabaseAndState(
        state_operations=[migrations.AddIndex(model_name=model_name, index=index)],
        database_operations=[migrations.RunPython(create, drop, elidable=False)],
    )
