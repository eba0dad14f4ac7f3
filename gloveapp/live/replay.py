"""Database reads for a socket that (re)connects: what it missed."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Max, Min

from gloveapp.live.models import LiveEvent


def current_cursor() -> int:
    """The id a page should reconnect from when it renders state now.

    Read it *before* reading the state the page shows: an event committed in between is
    then replayed (pages apply events idempotently, e.g. messages by seq) rather than lost.
    """
    return LiveEvent.objects.aggregate(newest=Max("id"))["newest"] or 0


@dataclass
class Replay:
    frames: list[dict] = field(default_factory=list)
    # Set when the client cannot catch up event by event and must reload its state.
    resync: dict | None = None


def replay_after(stream: str, last_event_id: int | None) -> Replay:
    """The stream's events after the client's cursor, in id order, or a resync order."""
    if last_event_id is None:
        return Replay()
    bounds = LiveEvent.objects.aggregate(oldest=Min("id"), newest=Max("id"))
    oldest, newest = bounds["oldest"], bounds["newest"] or 0
    if last_event_id > newest:
        # A cursor from another database (or before a reset): ids it "saw" may be reused.
        return Replay(resync=_resync("unknown_cursor", newest))
    if oldest is not None and last_event_id < oldest - 1:
        # Events after the cursor may have been pruned.
        return Replay(resync=_resync("expired", newest))
    limit = settings.GLOVE_LIVE_REPLAY_LIMIT
    rows = list(
        LiveEvent.objects.filter(stream=stream, id__gt=last_event_id)
        .order_by("id")
        .values_list("id", "type", "payload")[: limit + 1]
    )
    if len(rows) > limit:
        return Replay(resync=_resync("too_far_behind", newest))
    return Replay(
        frames=[{"id": id_, "type": type_, "payload": payload} for id_, type_, payload in rows]
    )


def _resync(reason: str, newest: int) -> dict:
    return {"id": None, "type": "resync", "payload": {"reason": reason, "last_event_id": newest}}
