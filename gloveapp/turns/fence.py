"""The fence of an attempt: the condition every write of one attempt of a turn is made on
(still running, by this worker, in this attempt), so a stale attempt stores nothing more."""

from __future__ import annotations

from django.db import transaction

from gloveapp.conversations.append import Fence, fence_holds
from gloveapp.turns.models import Turn

_TURN = Turn._meta.db_table
_FENCE_SQL = (
    f"EXISTS (SELECT 1 FROM {_TURN} WHERE id = %s AND status = 'running' AND worker_id = %s "
    "AND attempts = %s{lock})"
)


def turn_fence(turn: Turn) -> Fence:
    """The condition every write of this attempt of the turn is made on: the turn is still
    running, by this worker, in this attempt. A worker frozen past its lease (or cut off
    from the database) whose turn another worker took back then stores nothing more: its
    reply, tool results and prompts are refused (`FencedOff`) and the turn stops.

    On PostgreSQL the write's statement share-locks the turn row, so a take-back waits for
    the write to commit (and a write waits for a take-back, then sees it): the retry reads
    the conversation with every write of the earlier attempt in it, or none."""
    lock = " FOR SHARE" if transaction.get_connection().vendor == "postgresql" else ""
    return Fence(
        condition=_FENCE_SQL.replace("{lock}", lock),
        params=(turn.pk, turn.worker_id, turn.attempts),
    )


def turn_holds(turn: Turn) -> bool:
    """Whether this attempt of the turn is still its worker's (in the caller's transaction,
    share-locked on PostgreSQL: see `turn_fence`)."""
    return fence_holds(turn_fence(turn))
