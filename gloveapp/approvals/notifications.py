"""Telling people a request waits: email and signed webhooks, from an outbox.

`queue_notifications` writes one `ApprovalNotification` per recipient and event inside the
transaction that makes the event (the unique constraint makes a second one a no-op), so a
rolled-back change notifies nobody and a committed one is never forgotten.
`notifications_deliver` (the turn worker's scheduler) claims due rows one at a time in a
conditional update, sends, and marks them sent; a failure is retried with doubling backoff,
and a row whose sender died while sending is claimed again when its lease passes.

What "exactly once" means here: SMTP accepts a message with its final 250 reply, and a
sender killed before that reply delivered nothing, so the retry is the only copy. Killed in
the instant between the 250 and the row's "sent" (RFC 1047's window), the retry is a second
copy with the same Message-ID (and, for webhooks, the same `Idempotency-Key`), which mail
clients and receivers use to drop it.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from gloveapp.approvals.models import ApprovalNotification, ApprovalRequest
from gloveapp.core.escaping import mrkdwn, mrkdwn_code_block
from gloveapp.lib import outbox, webhook_signing

logger = logging.getLogger(__name__)
Event = ApprovalNotification.Event
Channel = ApprovalNotification.Channel
LINK_SALT = "glove.approvals.link"
MAX_GROUP_RECIPIENTS = 200
SUBJECTS = {
    Event.ASSIGNED: "Approval needed: {tool}",
    Event.REMINDER: "Reminder: {tool} still waits for your decision",
    Event.ESCALATION: "Escalated to you: {tool} waits for a decision",
    Event.EXPIRY: "Expired: {tool} was decided automatically ({decision})",
}


# -- writing the outbox ----------------------------------------------------------------------
def _parties(row: ApprovalRequest, event: str) -> tuple[list[Any], list[Any]]:
    if event == Event.ESCALATION:
        return [row.escalate_to_user], [row.escalate_to_group]
    users, groups = [row.assignee_user], [row.assignee_group]
    if event == Event.EXPIRY and row.escalated_at is not None:
        users.append(row.escalate_to_user)
        groups.append(row.escalate_to_group)
    return users, groups


def queue_notifications(*, row: ApprovalRequest, event: str, now: datetime | None = None) -> int:
    """Write the notifications of `event` (call inside the event's transaction); returns
    how many rows it asked for (a recipient already told of this event is skipped)."""
    now = now or timezone.now()
    users, groups = _parties(row, event)
    recipients: dict[str, Any] = {}
    for user in users:
        if user is not None and user.is_active and user.email:
            recipients.setdefault(user.email.lower(), user)
    for group in groups:
        if group is None:
            continue
        members = group.user_set.filter(is_active=True, is_staff=True).exclude(email="")
        for user in members.order_by("pk"):
            recipients.setdefault(user.email.lower(), user)
    notes = [
        ApprovalNotification(
            request=row,
            event=event,
            channel=Channel.EMAIL,
            recipient=email,
            user=user,
            next_attempt_at=now,
            created_at=now,
        )
        for email, user in recipients.items()
    ]
    hooks = settings.GLOVE_APPROVAL_WEBHOOKS or {}
    for group in groups:
        if group is not None and hooks.get(group.name):
            notes.append(
                ApprovalNotification(
                    request=row,
                    event=event,
                    channel=Channel.WEBHOOK,
                    recipient=group.name,
                    next_attempt_at=now,
                    created_at=now,
                )
            )
    if notes:
        # At most one per recipient and event: a repeat (a second sweep) changes nothing.
        ApprovalNotification.objects.bulk_create(notes, ignore_conflicts=True)
    return len(notes)


def queue_handoff_notifications(record: Any, event: str) -> int:
    """Tell a chat's group that it waits for a person (`event`: "handoff" when it entered
    the queue, "handoff_late" past its bound): one e-mail per staff member of the group with
    an address, and the group's webhook (GLOVE_APPROVAL_WEBHOOKS). Called inside the
    transaction that queued the chat; a chat of no group notifies nobody."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    if not record.group:
        return 0
    now = timezone.now()
    # The members through the group's name (one query, not the group's row and then its
    # users): every chat that enters a queue pays it, inside its transaction.
    members = (
        get_user_model()
        .objects.filter(groups__name=record.group, is_active=True, is_staff=True)
        .exclude(email="")
    )
    notes = [
        ApprovalNotification(
            handoff=record,
            event=event,
            channel=Channel.EMAIL,
            recipient=user.email.lower(),
            user=user,
            next_attempt_at=now,
            created_at=now,
        )
        for user in members.order_by("pk")[:MAX_GROUP_RECIPIENTS]
    ]
    hooked = bool((settings.GLOVE_APPROVAL_WEBHOOKS or {}).get(record.group))
    # A group with members exists; one without is asked only when it has a webhook.
    if hooked and (notes or Group.objects.filter(name=record.group).exists()):
        notes.append(
            ApprovalNotification(
                handoff=record,
                event=event,
                channel=Channel.WEBHOOK,
                recipient=record.group,
                next_attempt_at=now,
                created_at=now,
            )
        )
    if notes:
        ApprovalNotification.objects.bulk_create(notes, ignore_conflicts=True)
    return len(notes)


def console_link(session_id: str) -> str:
    """The chat on the staff console (absolute)."""
    try:
        path = reverse("handoffs")
    except NoReverseMatch:  # the pages are not mounted in this project
        path = "/handoffs/"
    return settings.GLOVE_PUBLIC_URL.rstrip("/") + f"{path}?chat={session_id}"


def _handoff_context(note: ApprovalNotification) -> dict[str, Any]:
    record = note.handoff
    group = record.group or "staff"
    late = note.event == Event.HANDOFF_LATE
    subject = f"A chat still waits for the {group}" if late else f"A chat waits for the {group}"
    why = record.reason or record.text or ""
    return {
        "subject": subject,
        "text": f"{subject}{f': {why}' if why else ''}.",
        "link": console_link(record.session_id),
        "session_id": record.session_id,
        "group": record.group,
    }


# -- links -------------------------------------------------------------------------------------
def link_token(request_id: Any) -> str:
    return signing.dumps({"r": str(request_id)}, salt=LINK_SALT, compress=True)


def link_request_id(token: str) -> str | None:
    """The request a signed link names, or None (forged, altered or too old)."""
    try:
        data = signing.loads(
            token, salt=LINK_SALT, max_age=settings.GLOVE_APPROVAL_LINK_TTL_SECONDS
        )
    except signing.BadSignature:
        return None
    return data.get("r") if isinstance(data, dict) and isinstance(data.get("r"), str) else None


def decision_link(request_id: Any) -> str:
    """The one-click link to the request's decision page (signed, absolute)."""
    try:
        path = reverse("approval-link", args=[link_token(request_id)])
    except NoReverseMatch:  # the pages are not mounted in this project
        path = f"/approvals/link/{link_token(request_id)}"
    return settings.GLOVE_PUBLIC_URL.rstrip("/") + path


# -- delivering --------------------------------------------------------------------------------
def notifications_deliver(*, now: datetime | None = None, limit: int = 50) -> int:
    """Send the notifications that are due; returns how many were sent."""
    return outbox.deliver_due(
        ApprovalNotification,
        now=now or timezone.now(),
        limit=limit,
        lease_seconds=settings.GLOVE_APPROVAL_NOTIFY_LEASE_SECONDS,
        max_attempts=settings.GLOVE_APPROVAL_NOTIFY_MAX_ATTEMPTS,
        load=lambda pk: ApprovalNotification.objects.select_related(
            "request", "request__assignee_user", "request__assignee_group", "user", "handoff"
        ).get(pk=pk),
        send=send_notification,
        what="approval notification",
    )


def send_notification(note: ApprovalNotification) -> None:
    if note.channel == Channel.EMAIL:
        _send_email(note)
    else:
        _send_webhook(note)


def _context(note: ApprovalNotification) -> dict[str, Any]:
    row = note.request
    subject = SUBJECTS[note.event].format(tool=row.tool_name, decision=row.decision or "")
    return {
        "note": note,
        "request": row,
        "subject": subject,
        "args_json": json.dumps(row.args, indent=2, ensure_ascii=False),
        "link": decision_link(row.pk),
        "assignee": (
            row.assignee_user.get_username()
            if row.assignee_user
            else (row.assignee_group.name if row.assignee_group else "the shared queue")
        ),
    }


def message_id(note: ApprovalNotification) -> str:
    """The same for every try of one notification: a receiver drops a repeat."""
    if note.request_id is None:
        return f"<handoff-{note.handoff_id}-{note.event}-{note.pk}@glove>"
    return f"<approval-{note.request_id}-{note.event}-{note.pk}@glove>"


def _send_email(note: ApprovalNotification) -> None:
    if note.request_id is None:
        context = _handoff_context(note)
        EmailMultiAlternatives(
            subject=context["subject"],
            body=f"{context['text']}\n\nOpen it on the console: {context['link']}\n",
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[note.recipient],
            headers={"Message-ID": message_id(note)},
        ).send()
        return
    context = _context(note)
    text = render_to_string("approvals/email/notification.txt", context)
    html = render_to_string("approvals/email/notification.html", context)
    email = EmailMultiAlternatives(
        subject=context["subject"],
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[note.recipient],
        headers={"Message-ID": message_id(note)},
    )
    email.attach_alternative(html, "text/html")
    email.send()


def webhook_body(note: ApprovalNotification) -> dict[str, Any]:
    """Slack-compatible JSON (`text` and `blocks`), plus the request for other receivers."""
    if note.request_id is None:
        return _handoff_webhook_body(note)
    context = _context(note)
    row = note.request
    link = context["link"]
    # Every text that is not ours (tool name, assignee, arguments) is escaped for mrkdwn:
    # a coffee named ```<https://evil.example|Approve here>``` stays text.
    subject, assignee = mrkdwn(context["subject"]), mrkdwn(context["assignee"])
    summary = f"*{subject}*\nAssigned to {assignee}."
    return {
        "text": f"{subject}: <{link}|open the request>",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": summary}},
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": mrkdwn_code_block(context["args_json"])},
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open the request"},
                        "url": link,
                    }
                ],
            },
        ],
        "approval": {
            "id": str(row.pk),
            "event": note.event,
            "tool": row.tool_name,
            "args": row.args,
            "status": row.status,
            "decision": row.decision or None,
            "url": link,
        },
    }


def _handoff_webhook_body(note: ApprovalNotification) -> dict[str, Any]:
    context = _handoff_context(note)
    text, link = mrkdwn(context["text"]), context["link"]
    return {
        "text": f"{text} <{link}|Open the chat>",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{text}*"}},
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open the chat"},
                        "url": link,
                    }
                ],
            },
        ],
        "handoff": {
            "session": context["session_id"],
            "event": note.event,
            "group": context["group"],
            "url": link,
        },
    }


def webhook_secret() -> str:
    """The key that signs what we send: never the one that accepts signed requests
    (GLOVE_WEBHOOK_SECRET), or every receiver of a notification could forge a decision."""
    return settings.GLOVE_APPROVAL_WEBHOOK_SECRET


def sign(body: bytes, timestamp: str, secret: str) -> str:
    return webhook_signing.sign(secret, timestamp, body)


def _send_webhook(note: ApprovalNotification) -> None:
    import httpx

    url = (settings.GLOVE_APPROVAL_WEBHOOKS or {}).get(note.recipient)
    if not url:
        raise RuntimeError(f"no webhook is configured for group {note.recipient!r}")
    secret = webhook_secret()
    if not secret:
        raise RuntimeError("GLOVE_APPROVAL_WEBHOOK_SECRET is not set")
    if secret == settings.GLOVE_WEBHOOK_SECRET:
        raise RuntimeError(
            "GLOVE_APPROVAL_WEBHOOK_SECRET equals GLOVE_WEBHOOK_SECRET (glove.E020): not sent"
        )
    body = json.dumps(webhook_body(note), ensure_ascii=False).encode()
    timestamp = str(int(time.time()))
    response = httpx.post(
        url,
        content=body,
        headers={
            "Content-Type": "application/json",
            "X-Glove-Timestamp": timestamp,
            "X-Glove-Signature": sign(body, timestamp, secret),
            "X-Glove-Event": f"approval.{note.event}" if note.request_id else note.event,
            "Idempotency-Key": f"approval-notification-{note.pk}",
        },
        timeout=10,
    )
    if response.status_code >= 300:
        raise RuntimeError(f"the webhook answered {response.status_code}")
