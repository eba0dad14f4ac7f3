"""Deleting many rows without one long transaction, and stopping between two batches.

A background loop of batches (retention, the usage rollup) runs where its caller says
when to stop (`stopping_when`): each batch ends with `stop_if_asked`, which raises `Stopped`
once the caller is stopping, so a worker told to stop (SIGTERM) stops within one batch,
not after the last of a million rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import transaction

_stopping: ContextVar[Callable[[], bool] | None] = ContextVar(
    "glove_batches_stopping", default=None
)


class Stopped(Exception):
    """The caller of a loop of batches is stopping: the loop ended between two batches."""


@contextmanager
def stopping_when(stopping: Callable[[], bool]) -> Iterator[None]:
    """Within it (in this thread or task), `stop_if_asked` raises once `stopping()` is true."""
    token = _stopping.set(stopping)
    try:
        yield
    finally:
        _stopping.reset(token)


def stop_if_asked() -> None:
    """Between two batches: raise `Stopped` if the loop's caller is stopping."""
    stopping = _stopping.get()
    if stopping is not None and stopping():
        raise Stopped


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
        stop_if_asked()
        with transaction.atomic(using=queryset.db):
            pks = list(queryset.order_by().values_list("pk", flat=True)[:size])
            if not pks:
                break
            _, per_model = model._base_manager.using(queryset.db).filter(pk__in=pks).delete()
        deleted += per_model.get(model._meta.label, 0)
        if len(pks) < size:
            break
    return deleted
