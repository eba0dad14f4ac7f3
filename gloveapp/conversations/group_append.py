"""Group commit of concurrent appends to one session, within one server process.

Every append to a session holds that session's row lock (and its stream's advisory lock)
until its commit is durable, so one session takes at most one commit per WAL flush: on this
project's machine `pg_test_fsync` measured 270-480 fdatasync/s, and that, not our code,
capped appends to one session (pgbench of the bare statement, 32 clients: ~340 tps). The
only way past it without giving up durability is fewer commits: requests that arrive while
the session's previous write is in flight are appended together, in arrival order, by one
statement (one commit, one flush) written by the first of them, the batch's leader.

Nothing a caller can observe changes: each request's messages are contiguous and in its
order; a request returns only after its rows are committed; one request's bad input (which
`messages_append` refuses before it gets here, so only a database refusal) fails that
request alone: a failed batch is retried request by request. Callers inside a transaction
never batch (their rows must commit with their transaction).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any

Write = Callable[[list[dict[str, Any]], list[str]], "list[Any] | None"]


class _Writer:
    """A lock that can be weakly referenced (a bare threading.Lock cannot)."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()


class _Batch:
    __slots__ = ("__weakref__", "done", "items", "outcomes")

    def __init__(self) -> None:
        self.items: list[tuple[list[dict[str, Any]], list[str]]] = []
        self.outcomes: list[Any] = []  # per item: rows, None (no session) or an exception
        self.done = threading.Event()


_lock = threading.Lock()
_open: dict[Hashable, _Batch] = {}  # batch key -> the batch still taking requests
# session -> the lock its leaders take in turn (gone once no batch of the session exists).
_writers: weakref.WeakValueDictionary[str, _Writer] = weakref.WeakValueDictionary()


def append_grouped(
    session_id: str,
    fields: list[dict[str, Any]],
    wires: list[str],
    write: Write,
    settle: Callable[[], None] | None = None,
    batch_key: Hashable | None = None,
) -> list[Any] | None:
    """`write(fields, wires)` for this request, in a batch with its concurrent neighbours
    that give the same `batch_key` (default: the session; requests whose writes differ in
    more than their rows give keys of their own, and their batches take turns).

    `settle()`, when given, runs once per batch after its write and before anyone of the
    batch returns, outside the session's writer lock: waiting for the commit to reach the
    disk (`append`'s early lock release) overlaps the next batch's write."""
    key = session_id if batch_key is None else batch_key
    with _lock:
        batch = _open.get(key)
        leader = batch is None
        if leader:
            batch = _Batch()
            _open[key] = batch
        index = len(batch.items)
        batch.items.append((fields, wires))
        writer = _writers.get(session_id)
        if writer is None:
            writer = _Writer()
            _writers[session_id] = writer
    if not leader:
        batch.done.wait()
        outcome = batch.outcomes[index]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    # While the session's previous batch is being written, this one fills up.
    try:
        with writer.lock:
            with _lock:
                if _open.get(key) is batch:
                    del _open[key]  # later requests start the next batch
            batch.outcomes = _write_batch(batch.items, write)
        if settle is not None and not all(
            isinstance(outcome, BaseException) for outcome in batch.outcomes
        ):
            settle()
    except BaseException as exc:  # never leave a follower waiting
        batch.outcomes = [exc] * len(batch.items)
    finally:
        batch.done.set()
    outcome = batch.outcomes[index]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _write_batch(items: list[tuple[list[dict[str, Any]], list[str]]], write: Write) -> list:
    if len(items) == 1:
        try:
            return [write(*items[0])]
        except Exception as exc:
            return [exc]
    fields = [values for item_fields, _ in items for values in item_fields]
    wires = [wire for _, item_wires in items for wire in item_wires]
    try:
        rows = write(fields, wires)
    except Exception:
        # Someone's rows were refused: write each request alone, so only it fails.
        return [_write_batch([item], write)[0] for item in items]
    if rows is None:
        return [None] * len(items)
    outcomes, start = [], 0
    for item_fields, _ in items:
        outcomes.append(rows[start : start + len(item_fields)])
        start += len(item_fields)
    return outcomes
