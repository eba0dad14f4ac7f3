"""Database reads for a socket that (re)connects: what it missed.

A client's cursor is an event's number in its stream (`LiveEvent.seq`), never the table's
key: each stream counts 1, 2, 3... on its own, so no client learns of other streams' events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.conf import settings

from gloveapp.live.models import LiveEvent, LiveStreamCounter


def current_cursor(stream: str) -> int:
    """The stream's last event number (0 before its first event): where a page of `stream`
    should reconnect from when it renders state now.

    Read it *before* reading the state the page shows: an event committed in between is
    then replayed (pages apply events idempotently, e.g. messages by seq) rather than lost.
    The stream's counter outlives its pruned events, so a quiet stream's cursor is its last
    number, not 0 (which would read as "expired" and reload the page forever).
    """
    last = (
        LiveStreamCounter.objects.filter(stream=stream).values_list("last_seq", flat=True).first()
    )
    return last or 0


@dataclass
class Replay:
    frames: list[dict] = field(default_factory=list)
    # Set when the client cannot catch up event by event and must reload its state.
    resync: dict | None = None


def replay_after(stream: str, last_event_id: int | None) -> Replay:
    """The stream's events after the client's cursor, in order, or a resync order."""
    if last_event_id is None:
        return Replay()
    # The newest number first: an event committed after it is replayed too, never missed.
    newest = current_cursor(stream)
    if last_event_id > newest:
        # A cursor from another database (or before a reset): numbers it "saw" may be reused.
        return Replay(resync=_resync("unknown_cursor", newest))
    if last_event_id == newest:
        return Replay()
    limit = settings.GLOVE_LIVE_REPLAY_LIMIT
    rows = list(
        LiveEvent.objects.filter(stream=stream, seq__gt=last_event_id)
        .order_by("seq")
        .values_list("seq", "type", "payload")[: limit + 1]
    )
    # A stream's numbers have no gaps, so a first event past the next number (or none at
    # all) means retention pruned what followed the cursor.
    if not rows or rows[0][0] != last_event_id + 1:
        return Replay(resync=_resync("expired", newest))
    if len(rows) > limit:
        return Replay(resync=_resync("too_far_behind", newest))
    return Replay(
        frames=[{"id": seq, "type": type_, "payload": payload} for seq, type_, payload in rows]
    )


def _resync(reason: str, newest: int) -> dict:
    return {"id": None, "type": "resync", "payload": {"reason": reason, "last_event_id": newest}}


def current_cursors(streams: dict[str, str]) -> str:
    """`current_cursor` of several streams in one read, for a page with a socket on each:
    JSON `{key: cursor}` for its `data-last-event-ids` (`streams` maps a key the page's
    script knows, a group's name or a workspace's id, to its stream)."""
    last = dict(
        LiveStreamCounter.objects.filter(stream__in=list(streams.values())).values_list(
            "stream", "last_seq"
        )
    )
    return json.dumps({key: last.get(stream, 0) for key, stream in streams.items()})
