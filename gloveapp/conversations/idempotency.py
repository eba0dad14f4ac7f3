"""Idempotent writes: a client's retry of an acknowledged request is answered, not redone.

A client that timed out does not know whether its post was stored; sending it again must not
store it twice. It sends the same `Idempotency-Key` with the retry (any printable ASCII up to
200 characters, unique per user: a UUID per message). The first request with a key claims it
in a row (`IdempotentRequest`, unique per user and key) inside the write's own transaction
and stores its answer there; a later request with the key gets that answer back and writes
nothing. A concurrent duplicate waits until the first commits (then it is a retry) or rolls
back (then it runs itself): on PostgreSQL, where the table is partitioned by day and the
database's unique index covers one day, on an advisory lock of the key taken before the
lookup (`gloveapp.lib.db.partitions.lock_keys`), so a duplicate sent across midnight is caught
too. Only acknowledged answers are kept: a refused request (a 4xx) rolls its claim back,
so its retry is tried afresh.

The same key sent with a different request (another route, session or body) is refused
(`IdempotencyKeyReused`) rather than answered with the first request's answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gloveapp.conversations.models import IdempotentRequest
from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.lib.db.partitions import is_partitioned, lock_keys, partitions_prune

KEY_HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 200
# A streamed answer whose request died before it finished leaves its claim unanswered; after
# this long a retry takes the claim over instead of being told the request is under way.
ABANDONED_AFTER = timedelta(minutes=10)


class IdempotencyKeyInvalid(ValueError):
    pass


class IdempotencyKeyReused(ValueError):
    """The key was first used for a different request."""


class IdempotentRequestInProgress(Exception):
    """The first request with this key is still being answered (a streamed answer)."""


def check_key(key: str) -> str:
    if not 0 < len(key) <= MAX_KEY_LENGTH or not all(" " <= ch <= "~" for ch in key):
        raise IdempotencyKeyInvalid(
            f"{KEY_HEADER} must be 1 to {MAX_KEY_LENGTH} printable ASCII characters."
        )
    return key


def request_fingerprint(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def idempotent_write(
    *, user_id: Any, key: str, scope: str, fingerprint: str, perform: Callable[[], Any]
) -> tuple[Any, bool]:
    """Run `perform()` (a write returning a JSON-able answer) once per (user, key).

    Returns (answer, replayed): the first request's answer, and whether it was stored
    before (nothing was written this time). Exceptions from `perform` roll the claim back.
    """
    with transaction.atomic():
        row, claimed = _claim(user_id, key, scope, fingerprint)
        if not claimed:
            return _stored_answer(row, scope, fingerprint), True
        answer = perform()
        if answer is None:
            answer = {}
        IdempotentRequest.objects.filter(pk=row.pk).update(answer=answer)
        return answer, False


def stream_claim(
    *, user_id: Any, key: str, scope: str, fingerprint: str
) -> tuple[IdempotentRequest | None, Any]:
    """For an answer produced over time (a stream): (claim, None) when this request must
    answer (then `stream_answered` or `stream_abandoned`), or (None, stored answer)."""
    with transaction.atomic():
        row, claimed = _claim(user_id, key, scope, fingerprint)
        if claimed:
            return row, None
        if row.answer is None and row.scope == scope and row.fingerprint == fingerprint:
            if row.created_at < timezone.now() - ABANDONED_AFTER:
                row.created_at = timezone.now()
                row.save(update_fields=["created_at"])
                return row, None
        return None, _stored_answer(row, scope, fingerprint)


def stream_answered(claim: IdempotentRequest, answer: Any) -> None:
    IdempotentRequest.objects.filter(pk=claim.pk).update(answer=answer)


def stream_abandoned(claim: IdempotentRequest) -> None:
    """The request ended without an answer: its retry runs afresh."""
    IdempotentRequest.objects.filter(pk=claim.pk, answer__isnull=True).delete()


def _claim(user_id: Any, key: str, scope: str, fingerprint: str) -> tuple[IdempotentRequest, bool]:
    key = check_key(key)
    # One writer of a key at a time, whatever day each one's row would land in: the second
    # waits here until the first's transaction ends, then its lookup sees the first's row.
    lock_keys(IdempotentRequest._meta.db_table, [f"{user_id}\x00{key}"])
    return IdempotentRequest.objects.get_or_create(
        user_id=user_id, key=key, defaults={"scope": scope, "fingerprint": fingerprint}
    )


def _stored_answer(row: IdempotentRequest, scope: str, fingerprint: str) -> Any:
    if row.scope != scope or row.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            f"This {KEY_HEADER} was already used for a different request; "
            "send a new key with a new request."
        )
    if row.answer is None:
        raise IdempotentRequestInProgress(
            f"The first request with this {KEY_HEADER} is still being answered; retry shortly."
        )
    return row.answer


def idempotency_keys_prune(*, older_than: timedelta) -> int:
    """Forget keys older than `older_than`; returns how many (dropped partitions' rows
    estimated). The turn worker's scheduler runs it (GLOVE_RETAIN_IDEMPOTENCY_KEYS_DAYS),
    and `prune_idempotency_keys` by hand. On PostgreSQL whole days are dropped
    (`gloveapp.lib.db.partitions.partitions_prune`); elsewhere rows go in bounded batches."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    cut = timezone.now() - older_than
    table = IdempotentRequest._meta.db_table
    if is_partitioned(table):
        return partitions_prune(
            table, column="created_at", cut=cut, batch=settings.GLOVE_RETENTION_BATCH
        )
    return delete_in_batches(IdempotentRequest.objects.filter(created_at__lt=cut))
