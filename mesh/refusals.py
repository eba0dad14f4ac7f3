"""Refused mesh frames, counted by reason in the database so every process adds to one tally.

A guard calls `record(reason)` for each refusal (possibly from inside an event loop, on a
flood of bad frames): counts gather in memory and a timer thread writes them at most once a
`FLUSH_DELAY`, one `UPDATE ... count + n` per reason, so a flood costs a few writes a second.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import F
from django.utils import timezone

from mesh.models import MeshRefusal

logger = logging.getLogger("mesh")

FLUSH_DELAY = 1.0

_lock = threading.Lock()
_pending: Counter[str] = Counter()
_timer: threading.Timer | None = None


def mesh_refusals_add(*, counts: dict[str, int]) -> None:
    """Add `counts` (reason -> how many) to the stored tally."""
    now = timezone.now()
    for reason, count in counts.items():
        if count <= 0:
            continue
        updated = MeshRefusal.objects.filter(reason=reason).update(
            count=F("count") + count, last_at=now
        )
        if updated:
            continue
        try:
            with transaction.atomic():
                MeshRefusal.objects.create(reason=reason, count=count, last_at=now)
        except IntegrityError:  # another process created it meanwhile
            MeshRefusal.objects.filter(reason=reason).update(count=F("count") + count, last_at=now)


def record(reason: str) -> None:
    """Count one refusal; written within `FLUSH_DELAY` (see `flush`)."""
    global _timer
    with _lock:
        _pending[reason] += 1
        if _timer is None:
            _timer = threading.Timer(FLUSH_DELAY, _flush_in_thread)
            _timer.daemon = True
            _timer.start()


def forget_pending() -> None:
    """Drop what is pending, unwritten (a test's clean slate)."""
    global _timer
    with _lock:
        _pending.clear()
        if _timer is not None:
            _timer.cancel()
            _timer = None


def flush() -> None:
    """Write what is pending now (tests, and the timer)."""
    global _timer
    with _lock:
        counts = dict(_pending)
        _pending.clear()
        if _timer is not None:
            _timer.cancel()
            _timer = None
    if counts:
        try:
            mesh_refusals_add(counts=counts)
        except Exception:
            logger.exception("[glove-mesh] could not store refusal counts %s:", counts)


def _flush_in_thread() -> None:
    close_old_connections()
    try:
        flush()
    finally:
        connection.close()
