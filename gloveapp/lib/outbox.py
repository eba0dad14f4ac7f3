"""One delivery round of an outbox table: the approvals' notifications and the turns'
completion webhooks share it.

A row is `pending` until it is due (`next_attempt_at`), `sending` while one worker holds it
(until `claimed_until`: a worker that died mid-send leaves it due again), then `sent`, or
back to `pending` with a backoff after a failed try, or `failed` after the last one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Model, Q
from django.utils import timezone

logger = logging.getLogger(__name__)

PENDING, SENDING, SENT, FAILED = "pending", "sending", "sent", "failed"
# The wait before the next try after a failure: doubling from the first, at most the last.
FIRST_RETRY_SECONDS = 5
MAX_RETRY_SECONDS = 600


def deliver_due(
    model: type[Model],
    *,
    now: datetime,
    limit: int,
    lease_seconds: float,
    max_attempts: int,
    load: Callable[[int], Any],
    send: Callable[[Any], None],
    what: str,
    order: tuple[str, ...] = ("next_attempt_at", "id"),
) -> int:
    """Send `model`'s due rows, each by one worker only: `load(pk)` reads a claimed row,
    `send(row)` delivers it (raising when it did not). Returns how many were sent."""
    rows = model._default_manager
    due = (
        rows.filter(
            Q(status=PENDING, next_attempt_at__lte=now) | Q(status=SENDING, claimed_until__lt=now)
        )
        .order_by(*order)
        .values_list("pk", "status", "attempts")[:limit]
    )
    sent = 0
    for pk, status, attempts in list(due):
        # Race: other workers read the same due rows. The claim is conditional on the
        # status and attempt count read, so exactly one of them sends this try.
        claimed = rows.filter(pk=pk, status=status, attempts=attempts).update(
            status=SENDING,
            claimed_until=now + timedelta(seconds=lease_seconds),
            attempts=attempts + 1,
        )
        if claimed != 1:
            continue
        row = load(pk)
        mine = rows.filter(pk=pk, status=SENDING, attempts=attempts + 1)
        try:
            send(row)
        except Exception as error:
            gave_up = attempts + 1 >= max_attempts
            delay = min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2**attempts)
            logger.warning("%s %s failed (try %s): %s", what, pk, attempts + 1, error)
            mine.update(
                status=FAILED if gave_up else PENDING,
                next_attempt_at=now + timedelta(seconds=delay),
                claimed_until=None,
                last_error=str(error)[:2000],
            )
            continue
        mine.update(status=SENT, sent_at=timezone.now(), claimed_until=None)
        sent += 1
    return sent
