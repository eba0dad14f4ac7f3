"""Nobody answers a queued chat in time, or people are away: the customer is told what
happens next, once, and the group's staff are e-mailed; the chat stays in the queue."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from gloveapp.approvals.notifications import notifications_deliver, sign
from gloveapp.conversations import handoff
from gloveapp.conversations.handoff_bounds import queue_overdue_sweep
from gloveapp.conversations.models import HandoffRecord, Message, Session
from gloveapp.conversations.services import session_create
from tests.approvals.mailserver import HookReceiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bounded(obedient, settings):
    entry = dict(settings.GLOVE_AGENTS["obedient"])
    entry["handoff"] = {"group": "baristas", "max_queue_wait_seconds": 60}
    settings.GLOVE_AGENTS = {**settings.GLOVE_AGENTS, "obedient": entry}


def _told(session_id: str) -> list[Message]:
    return [
        row
        for row in Message.objects.filter(session_id=session_id, sender="agent")
        if (row.extra or {}).get("author", {}).get("kind") == "system"
    ]


def test_nobody_claiming_before_the_bound_tells_the_customer_once(bounded, customer, bea):
    bea.email = "bea@example.com"
    bea.save()
    chat = session_create(owner=customer, agent_name="obedient")
    handoff.handoff_request(
        session_id=chat.pk, actor=handoff.Actor(user=customer), via="page", group="baristas"
    )
    assert queue_overdue_sweep() == 0  # not yet
    # The queue entry itself is told to the group through the approvals' outbox.
    assert notifications_deliver() == 1
    assert [m.subject for m in mail.outbox] == ["A chat waits for the baristas"]
    later = timezone.now() + timedelta(seconds=61)
    assert queue_overdue_sweep(now=later) == 1
    assert queue_overdue_sweep(now=later + timedelta(seconds=60)) == 0
    told = _told(chat.pk)
    assert len(told) == 1 and "Nobody from the baristas could answer yet" in told[0].text
    assert notifications_deliver() == 1
    assert notifications_deliver() == 0  # each once
    assert [m.to for m in mail.outbox] == [["bea@example.com"], ["bea@example.com"]]
    assert mail.outbox[1].subject == "A chat still waits for the baristas"
    assert f"/handoffs/?chat={chat.pk}" in mail.outbox[1].body
    assert Session.objects.get(pk=chat.pk).answerer == "queued"
    assert HandoffRecord.objects.filter(session=chat, kind="overdue").count() == 1
    # Claimed late, the chat is the person's as any other.
    handoff.handoff_claim(session_id=chat.pk, staff=bea)
    assert Session.objects.get(pk=chat.pk).answerer == "person"


def test_outside_opening_hours_the_customer_is_told_at_once(obedient, customer, settings):
    now = timezone.localtime()
    start = (now + timedelta(hours=1)).strftime("%H:%M")
    end = (now + timedelta(hours=2)).strftime("%H:%M")
    entry = dict(settings.GLOVE_AGENTS["obedient"])
    entry["handoff"] = {"group": "baristas", "opening_hours": [start, end]}
    settings.GLOVE_AGENTS = {**settings.GLOVE_AGENTS, "obedient": entry}
    chat = session_create(owner=customer, agent_name="obedient")
    handoff.handoff_request(session_id=chat.pk, actor=handoff.Actor(user=customer), via="api")
    told = _told(chat.pk)
    assert len(told) == 1
    assert f"people answer from {start} to {end}" in told[0].text
    assert queue_overdue_sweep() == 0


def test_a_queue_entry_reaches_the_groups_signed_webhook(obedient, customer, bea, settings):
    chat = session_create(owner=customer, agent_name="obedient")
    with HookReceiver() as hook:
        settings.GLOVE_APPROVAL_WEBHOOKS = {"baristas": hook.url}
        settings.GLOVE_APPROVAL_WEBHOOK_SECRET = "hook-secret-0123456789"
        handoff.handoff_request(
            session_id=chat.pk, reason="refund", actor=handoff.Actor(user=customer), via="page"
        )
        assert notifications_deliver() == 1
    headers, raw = hook.posts[0]
    body = json.loads(raw)
    assert body["handoff"]["session"] == chat.pk and body["handoff"]["event"] == "handoff"
    assert "refund" in body["text"]
    assert headers["x-glove-event"] == "handoff"
    assert headers["x-glove-signature"] == sign(
        raw, headers["x-glove-timestamp"], "hook-secret-0123456789"
    )
