"""Small builders shared by the conversations, inbox and ORM store tests."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connections

from gloveapp.conversations.models import Session
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.live.models import LiveEvent
from inbox.models import InboxItem
from inbox.services import inbox_item_add
from tests.pg_budget import django_concurrency_for, explain_refusal


def post_item(
    item_id: str = "inbox_1_watch",
    *,
    session_id: str = "coffee_session",
    tag: str = "restock_watch",
    request: str = "Notify when Yirgacheffe is back in stock",
    blocking: bool = False,
    created_at: str = "2030-01-01T10:00:00.000Z",
    **extra: Any,
) -> InboxItem:
    return inbox_item_add(
        session_id=session_id,
        item=CoreInboxItem(
            id=item_id, tag=tag, request=request, blocking=blocking, created_at=created_at
        ),
        **extra,
    )


def snapshot() -> dict[str, Any]:
    """Everything a refused call must leave untouched."""
    return {
        "items": list(InboxItem.objects.order_by("pk").values()),
        "sessions": list(Session.objects.order_by("pk").values()),
        "events": LiveEvent.objects.count(),
    }


def run_in_threads(count: int, target: Callable[[int], Any]) -> list[Any]:
    """Run `target(0..count-1)` in threads released together; each closes its connections.

    Every thread has its own database connection, so this is real concurrency against the
    database, not interleaving on one connection. On a shared PostgreSQL the threads are
    capped to the connections it has free (tests/pg_budget.py); each then runs several
    targets in turn, so all `count` still race for the same rows.
    """
    workers = django_concurrency_for(count)
    barrier = threading.Barrier(workers)
    results: list[Any] = [None] * count

    def work(first: int) -> None:
        try:
            barrier.wait(timeout=30)
            for index in range(first, count, workers):
                try:
                    results[index] = target(index)
                except BaseException as exc:  # the caller inspects what each target ended with
                    results[index] = exc
        except BaseException as exc:
            results[first] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a worker thread hung"
    for outcome in results:
        explained = explain_refusal(outcome) if isinstance(outcome, BaseException) else None
        if explained:
            raise AssertionError(explained) from outcome
    return results


@pytest.fixture(autouse=True)
def close_async_orm_connection() -> Iterator[None]:
    """Async code runs the ORM in asgiref's single executor thread, on that thread's own
    connection; close it after each test so the test database can be flushed and dropped.
    (Autouse where a conftest imports it.)"""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


async def serve_worker_until(done: Callable[[], bool], *, worker_id: str, looks: int) -> None:
    """Run a turn worker in this event loop (its scheduler: retention, partitions) until
    `done()` (a sync check, run in a thread) is true or it was looked at `looks` times,
    0.05 s apart; then stop it and close the connections its thread kept."""
    from gloveapp.turns.engine import TurnEngine
    from gloveapp.turns.queue.tasks import enqueue_session

    engine = TurnEngine(requeue=enqueue_session, worker_id=worker_id)
    serving = asyncio.ensure_future(engine.serve())
    try:
        for _ in range(looks):
            if await sync_to_async(done)():
                break
            await asyncio.sleep(0.05)
    finally:
        await engine.stop(grace=1)
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await sync_to_async(connections.close_all)()


def server_ends_connection(connection: Any) -> None:
    """The server ends `connection`'s backend (`pg_terminate_backend`, as a PostgreSQL restart
    ends them all); returns once its goodbye reached the connection's socket."""
    import select
    import time

    pid = connection.connection.info.backend_pid
    killer = connection.copy()
    try:
        with killer.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        killer.close()
    deadline = time.monotonic() + 10
    socket = connection.connection.pgconn.socket
    while time.monotonic() < deadline and not select.select([socket], [], [], 0.1)[0]:
        pass


@contextlib.contextmanager
def connection_cut_after_commit(table: str) -> Iterator[list[str]]:
    """The server ends this thread's PostgreSQL connection (`server_ends_connection`) right
    after a write into `table` has committed: at the first statement outside a transaction
    that follows it. Yields the statements that met the cut (empty if it never came)."""
    from django.db import connection

    cut: list[str] = []
    armed = False

    def wrapper(execute: Callable, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal armed
        if f'INSERT INTO "{table}"' in sql or f"INSERT INTO {table}" in sql:
            armed = True
        elif armed and not cut and not connection.in_atomic_block:
            cut.append(sql)
            server_ends_connection(connection)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield cut
    if cut:  # the test client keeps the request's connection: the test's next query opens one
        connection.close()
