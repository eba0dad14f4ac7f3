"""A turn's events on its session's stream: what every page of the chat, and every client
following the turn, reads of it (queued, started, waiting, finished...)."""

from __future__ import annotations

from typing import Any

from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import session_stream
from gloveapp.turns.models import Turn


def turn_event(turn: Turn, type: str, payload: dict[str, Any]) -> int:
    """Record the event on the turn's session stream; returns its number in the stream."""
    return record_event(stream=session_stream(turn.session_id), type=type, payload=payload).seq
