"""The one rule for a database that goes away (a restart, a failover, a network cut) under
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
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from django.db import connections
from django.db.utils import InterfaceError, OperationalError

from gloveapp.observe import metrics

logger = logging.getLogger("gloveapp.lib.db")

# Bounded: once the database is back, every loop notices within BACKOFF_MAX_SECONDS.
BACKOFF_FIRST_SECONDS = 0.1
BACKOFF_MAX_SECONDS = 2.0


def _outage_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OperationalError, InterfaceError]
    with suppress(ImportError):  # psycopg's own, from connections Django does not wrap
        import psycopg

        errors += [psycopg.OperationalError, psycopg.InterfaceError]
    return tuple(errors)


def _chain(error: BaseException | None) -> list[BaseException]:
    """`error` and what caused it (Django's wrappers keep the driver's error as the cause)."""
    found: list[BaseException] = []
    while error is not None and all(error is not seen for seen in found):
        found.append(error)
        error = error.__cause__ or error.__context__
    return found


def _sqlstate(error: BaseException) -> str | None:
    return getattr(error, "sqlstate", None)


def is_transaction_conflict(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) is the database ending a transaction that
    conflicted with another (a deadlock, 40P01; a serialization failure, 40001): nothing
    of it was done, and running it again is the remedy, but the database is there."""
    return any((_sqlstate(each) or "").startswith("40") for each in _chain(error))


def _is_client_side_error(error: BaseException) -> bool:
    """psycopg's own InternalError, raised by the client and not the server (no SQLSTATE):
    the connection's protocol state is not what psycopg expects ("received 2 results from
    command 'BEGIN'", after PgBouncer lost its server connection mid-transaction). Nothing
    can be trusted on that connection; it is a cut connection, not a bad statement."""
    with suppress(ImportError):
        import psycopg

        return isinstance(error, psycopg.InternalError) and _sqlstate(error) is None
    return False


def is_database_outage(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) says the database could not be reached or the
    connection broke: OperationalError and InterfaceError (a bad statement raises others),
    and psycopg's client-side InternalError (a connection whose protocol state is lost).
    A transaction conflict (`is_transaction_conflict`: a deadlock) is one too for the
    rules that retry (nothing was done, running again is the remedy); it is logged as
    what it is."""
    errors = _outage_errors()
    return any(isinstance(each, errors) or _is_client_side_error(each) for each in _chain(error))


def answer_after_commit[T](read: Callable[[], T], *, otherwise: Callable[[], T]) -> T:
    """`read()`: what a request whose write has committed reads for its answer; or, when the
    database went away since, `otherwise()`, built without it from what the request holds.
    A 503 says "nothing was done, send it again": after a commit that is untrue, and the
    client's second send would do the write twice (a message stored twice)."""
    try:
        return read()
    except Exception as error:
        if not is_database_outage(error):
            raise
        logger.warning("answered from the committed write: %s", describe_database_error(error))
        return otherwise()


def describe_database_error(error: BaseException) -> str:
    """What a log line says about an outage or a conflict, in a few words."""
    if is_transaction_conflict(error):
        return f"a transaction conflict ({_one_line(error)}), not an outage"
    return f"the database is unreachable ({_one_line(error)})"


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
        if is_transaction_conflict(error):
            # The database is there: a deadlock or a serialization failure ended the
            # transaction (two writers took locks in opposite orders, or raced).
            self._log.warning("%s: %s; retrying", self.label, describe_database_error(error))
        elif is_database_outage(error):
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
