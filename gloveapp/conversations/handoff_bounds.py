"""When nobody can answer a queued chat: outside the agent's opening hours, or past its
`max_queue_wait_seconds` in the queue (`agents.handoff_config`).

The customer is told what happens next (an automatic assistant message, with
`author.kind == "system"`), once per stay in the queue (the conditional update of
`Session.queue_told_at`), and the group's people are told through the approvals' outbox
(e-mail, signed webhook: `handoff_texts.queue_entered`). The chat stays in the queue:
a person who frees up still finds it. The turn worker's scheduler runs the sweep.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gloveapp.agents.handoff_config import HandoffConfig, agent_handoff
from gloveapp.conversations.handoff_texts import AUTHOR_KEY, queue_entered
from gloveapp.conversations.models import Answerer, HandoffRecord, Session
from gloveapp.conversations.services import messages_append
from gloveapp.core.types import Message as CoreMessage
from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import handoffs_stream, session_stream

logger = logging.getLogger(__name__)
BATCH = 100
SYSTEM_AUTHOR = {"kind": "system", "name": "", "label": "Automatic message"}


def _hours(config: HandoffConfig) -> str:
    if config.opening_hours is None:
        return ""
    start, end = config.opening_hours
    return f" (people answer from {start:%H:%M} to {end:%H:%M}, {settings.TIME_ZONE})"


def told_text(config: HandoffConfig, group: str, *, closed: bool) -> str:
    if closed and config.closed_text:
        return config.closed_text
    who = f"the {group}" if group else "our staff"
    if closed:
        return (
            f"Nobody from {who} is available right now{_hours(config)}. Your messages are "
            "kept, and a person will answer here when they are back."
        )
    return (
        f"Nobody from {who} could answer yet{_hours(config)}. Your messages are kept, and a "
        "person will answer here as soon as one is free; we have let them know."
    )


def tell_customer(*, session_id: str, config: HandoffConfig, closed: bool, now: datetime) -> bool:
    """Tell the customer of a queued chat that nobody answers now, once per stay in the
    queue; e-mail the group's staff. False when told already (or no longer queued)."""
    with transaction.atomic():
        told = Session.objects.filter(
            pk=session_id, answerer=Answerer.QUEUED, queue_told_at__isnull=True
        ).update(queue_told_at=now)
        if not told:
            return False
        group = Session.objects.values_list("answerer_group", flat=True).get(pk=session_id)
        text = told_text(config, group, closed=closed)
        messages_append(
            session_id=session_id,
            messages=[
                CoreMessage(sender="agent", text=text, extra={AUTHOR_KEY: dict(SYSTEM_AUTHOR)})
            ],
        )
        record = HandoffRecord.objects.create(
            session_id=session_id,
            kind=HandoffRecord.Kind.OVERDUE,
            from_state=Answerer.QUEUED,
            to_state=Answerer.QUEUED,
            actor_label="closed" if closed else "queue bound",
            via="rule",
            group=group,
            text=text,
        )
        payload = {"event": "overdue", "text": text, "closed": closed}
        record_event(
            stream=session_stream(session_id), type="session.answerer.told", payload=payload
        )
        record_event(
            stream=handoffs_stream(group),
            type="handoff.overdue",
            payload={"session": session_id, **payload},
        )
        queue_entered(record, "handoff_late")
    return True


def on_queued(session: Session, *, now: Any = None) -> None:
    """A chat just entered the queue: outside the agent's opening hours, say so at once."""
    config = agent_handoff(session.agent_name)
    now = now or timezone.now()
    if config.enabled and not config.open_at(now):
        tell_customer(session_id=session.pk, config=config, closed=True, now=now)


def queue_overdue_sweep(*, now: datetime | None = None) -> int:
    """Tell the customers of chats queued past their agent's `max_queue_wait_seconds`, or
    queued while its people are away (opening hours): a batch per agent per run; returns
    how many were told."""
    now = now or timezone.now()
    told = 0
    for agent_name in sorted(getattr(settings, "GLOVE_AGENTS", {}) or {}):
        config = agent_handoff(agent_name)
        closed = not config.open_at(now)
        if not config.enabled or not (closed or config.max_queue_wait_seconds):
            continue
        overdue = Session.objects.filter(
            answerer=Answerer.QUEUED, agent_name=agent_name, queue_told_at__isnull=True
        )
        if not closed:
            wait = timedelta(seconds=config.max_queue_wait_seconds)
            overdue = overdue.filter(answerer_since__lt=now - wait)
        found = overdue.order_by("answerer_since").values_list("pk", flat=True)[:BATCH]
        for session_id in list(found):
            told += tell_customer(session_id=session_id, config=config, closed=closed, now=now)
    return told
