"""Approval requests and their decisions, as rows every process shares.

A request is opened when a running turn asks a person to decide on a tool call
(`gloveapp.core.approvals`); it holds the fingerprint of the call, the decisions allowed, who
decides and the deadlines. Its one decision is an `ApprovalDecision` row (one-to-one: the
database itself refuses a second), written by `services.approval_decide` alone.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from gloveapp.core.approvals.decisions import DECISIONS, EDIT


class ApprovalRequest(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        DECIDED = "decided"
        # Its turn ended (stopped, failed, taken back) before anyone decided: nothing waits.
        WITHDRAWN = "withdrawn"

    # A random id: guessing one tells an outsider nothing.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(
        "conversations.Session", on_delete=models.CASCADE, related_name="approval_requests"
    )
    # The turn and display slot that wait for the decision (no foreign key: the turns sit
    # above this app).
    turn_id = models.BigIntegerField(null=True, blank=True)
    slot_id = models.CharField(max_length=64, blank=True, default="")
    tool_name = models.CharField(max_length=200)
    call_id = models.CharField(max_length=200, blank=True, default="")
    args = models.JSONField()
    fingerprint = models.CharField(max_length=64)
    input_schema = models.JSONField(null=True, blank=True)
    # How the call reads to people, from the tool's `summary` when the request opened
    # (empty: the tool declares none, and the pages show the arguments).
    label = models.CharField(max_length=200, blank=True, default="")
    summary = models.CharField(max_length=500, blank=True, default="")
    customer_summary = models.CharField(max_length=500, blank=True, default="")
    total = models.CharField(max_length=500, blank=True, default="")
    decisions = models.JSONField()
    # Argument names only staff see.
    staff_only = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    decision = models.CharField(max_length=10, blank=True, default="")
    assignee_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="assigned_approvals",
    )
    assignee_group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="assigned_approvals",
    )
    escalate_to_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    escalate_to_group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    remind_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    on_expire = models.CharField(max_length=10, default="reject")
    on_expire_text = models.TextField(blank=True, default="")
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # When the waiting turn took the decision (its tool then ran, or not).
    delivered_at = models.DateTimeField(null=True, blank=True)
    # The person who asked for it, when a person did (publishing an agent version): never
    # its decider unless GLOVE_APPROVAL_SELF_APPROVAL (`access.may_decide`). Null: a turn.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            # The queues' order (created_at, id) in every index, so a page is an ordered
            # index range scan that stops after its rows, never a sort of the whole queue.
            models.Index(fields=["status", "created_at", "id"], name="approval_status_created_idx"),
            # The admin's list, newest first, unfiltered.
            models.Index(fields=["created_at", "id"], name="approval_created_idx"),
            models.Index(
                fields=["assignee_user", "status", "created_at", "id"],
                name="approval_user_queue_idx",
            ),
            models.Index(
                fields=["assignee_group", "status", "created_at", "id"],
                name="approval_group_queue_idx",
            ),
            models.Index(fields=["session", "status"]),
            # The admin's search and filter by exact tool name, newest first: with the index
            # on the session, a search for a tool name or a session id is two index ranges,
            # not a read of the table.
            models.Index(
                fields=["tool_name", "created_at", "id"], name="approval_tool_created_idx"
            ),
            # The admin's decision filter, newest first (`?decision=edit` is rare: without it
            # the list walked every request to find a page).
            models.Index(
                fields=["decision", "created_at", "id"], name="approval_decision_created_idx"
            ),
            # What staff changed in a session's calls, for the chat page's cards
            # (`selectors.session_edits`): a long chat's decided requests are many, its edits
            # few, and only these are read.
            models.Index(
                fields=["session", "call_id"],
                condition=Q(status="decided", decision=EDIT),
                name="approval_session_edit_idx",
            ),
            models.Index(fields=["turn_id", "status"]),
            models.Index(
                fields=["expires_at"], condition=Q(status="open"), name="approval_open_expiry_idx"
            ),
            models.Index(
                fields=["escalate_at"],
                condition=Q(status="open", escalated_at__isnull=True),
                name="approval_open_escalate_idx",
            ),
            models.Index(
                fields=["remind_at"],
                condition=Q(status="open", reminded_at__isnull=True),
                name="approval_open_remind_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class ApprovalDecision(models.Model):
    """Who decided what on a request, when, through which channel, on which fingerprint."""

    class Channel(models.TextChoices):
        PAGE = "page"
        ADMIN = "admin"
        REST = "rest"
        WEBHOOK = "webhook"
        EMAIL = "email"
        EXPIRY = "expiry"
        PYTHON = "python"

    request = models.OneToOneField(
        ApprovalRequest, on_delete=models.CASCADE, related_name="decision_row"
    )
    kind = models.CharField(max_length=10, choices=[(kind, kind) for kind in DECISIONS])
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="approval_decisions",
    )
    # Kept as text too: the audit outlives a deleted user.
    username = models.CharField(max_length=150, blank=True, default="")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    fingerprint_seen = models.CharField(max_length=64)
    args = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    text = models.TextField(blank=True, default="")
    decided_at = models.DateTimeField()

    class Meta:
        ordering = ["-decided_at", "-id"]
        indexes = [
            # The admin's list (and the audit export), newest first.
            models.Index(fields=["decided_at", "id"], name="approval_decision_decided_idx"),
            # Its filters by kind and by channel, newest first, whatever the value.
            models.Index(fields=["kind", "decided_at", "id"], name="approval_decision_kind_idx"),
            models.Index(
                fields=["channel", "decided_at", "id"], name="approval_decision_channel_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} by {self.username or self.channel}"


class ApprovalNotification(models.Model):
    """The outbox: one email or webhook about one event of one request, for one recipient.

    Written in the transaction that makes the event (assignment, reminder, escalation,
    expiry); delivered by the turn worker's scheduler (`notifications.notifications_deliver`),
    retried with backoff. The unique constraint makes it at most one per recipient and event.
    """

    class Event(models.TextChoices):
        ASSIGNED = "assigned"
        REMINDER = "reminder"
        ESCALATION = "escalation"
        EXPIRY = "expiry"
        # A chat entered a group's queue, or waited there past its agent's bound
        # (`conversations.handoff`): the same outbox tells the group's people.
        HANDOFF = "handoff"
        HANDOFF_LATE = "handoff_late"

    class Channel(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    request = models.ForeignKey(
        ApprovalRequest,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notifications",
    )
    # Or the change of who answers a chat that it tells of (a handoff's notification).
    handoff = models.ForeignKey(
        "conversations.HandoffRecord",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    event = models.CharField(max_length=12, choices=Event.choices)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    # An email address, or the group whose webhook it goes to.
    recipient = models.CharField(max_length=254)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "event", "channel", "recipient"],
                name="one_notification_per_recipient_and_event",
            ),
            models.UniqueConstraint(
                fields=["handoff", "channel", "recipient"],
                condition=Q(handoff__isnull=False),
                name="one_handoff_notification_per_recipient",
            ),
            models.CheckConstraint(
                condition=Q(request__isnull=False) | Q(handoff__isnull=False),
                name="notification_of_something",
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status__in=["pending", "sending"]),
                name="approval_notify_due_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.channel} to {self.recipient} ({self.status})"
