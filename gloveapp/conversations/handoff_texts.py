"""The words a human stretch leaves in a chat, shared by `handoff` and `handoff_bounds`:
the framework context of its notes, their markers, the key of a message's author; and who
is told when a chat enters a group's queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

HANDOFF_FRAMEWORK_CONTEXT = "handoff"
HANDOFF_STARTED = "[Handoff started]"
HANDOFF_ENDED = "[Handoff ended]"
# The key of a person's (or an automatic) message's author in the message's extra data:
# Glove's frontends render the message as any assistant message; the author rides along.
AUTHOR_KEY = "author"

# What runs, inside the transaction, when a chat enters a queue ("handoff") or waits there
# past its bound ("handoff_late"): `listener(record, event)`. The approvals app registers its
# outbox (e-mail and signed webhooks to the group); an app above this one may add its own.
_QUEUE_ENTRY_LISTENERS: list[Callable[[Any, str], Any]] = []


def on_queue_entry(listener: Callable[[Any, str], Any]) -> None:
    if listener not in _QUEUE_ENTRY_LISTENERS:
        _QUEUE_ENTRY_LISTENERS.append(listener)


def queue_entered(record: Any, event: str) -> None:
    for listener in _QUEUE_ENTRY_LISTENERS:
        listener(record, event)
