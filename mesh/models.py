"""What the database mesh transport keeps: the registry, the sender table, the deliveries.

The inbox items themselves are ordinary `inbox.InboxItem` rows in the recipient agent's
session (`mesh:<agent id>`); a `MeshDelivery` row says that message <id> reached recipient
<agent> (unique: at most once per recipient) and is the cursor a waiting agent polls.
"""

from __future__ import annotations

from django.db import models

from inbox.models import InboxItem

MAX_ID = 128


class MeshAgent(models.Model):
    agent_id = models.CharField(primary_key=True, max_length=MAX_ID)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    capabilities = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    # The DjangoStore session that is this agent's inbox (a chat session, for example);
    # empty: `mesh:<agent id>`.
    inbox_session = models.CharField(max_length=MAX_ID, blank=True, default="")
    registered_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent_id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.agent_id})"


class MeshSentMessage(models.Model):
    """message id -> sender, for routing acks (Glove's 1,024-entry LRU, kept for good).

    On PostgreSQL this table and `MeshDelivery` are partitioned by day (`mesh/0001`): their
    keys include the day, each partition keeps the unique key (one sender per message id;
    one delivery per message and recipient) with a unique index, and across days every
    writer takes an advisory lock on the key first (`services._record_senders`,
    `services._claim_many`)."""

    message_id = models.CharField(primary_key=True, max_length=MAX_ID)
    sender = models.CharField(max_length=MAX_ID)
    kind = models.CharField(max_length=10)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.message_id} from {self.sender}"


class MeshDelivery(models.Model):
    class Kind(models.TextChoices):
        DIRECT = "direct"
        BROADCAST = "broadcast"
        ACK = "ack"

    message_id = models.CharField(max_length=MAX_ID)
    recipient = models.CharField(max_length=MAX_ID)
    sender = models.CharField(max_length=MAX_ID)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    body = models.JSONField()
    inbox_item = models.ForeignKey(
        "inbox.InboxItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    delivered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "mesh deliveries"
        constraints = [
            # At most once per recipient: a retried send of the same id delivers nothing new.
            models.UniqueConstraint(
                fields=["message_id", "recipient"], name="mesh_delivery_once_per_recipient"
            )
        ]
        indexes = [
            models.Index(fields=["recipient", "id"], name="mesh_delivery_cursor_idx"),
            # The admin's filters by sender and by kind, newest first, whatever the value.
            models.Index(fields=["sender", "id"], name="mesh_delivery_sender_idx"),
            models.Index(fields=["kind", "id"], name="mesh_delivery_kind_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.message_id} {self.sender} -> {self.recipient}"


class MeshTraffic(InboxItem):
    """The `mesh:` inbox items of every agent, for the admin (a proxy: no table)."""

    class Meta:
        proxy = True
        verbose_name = "mesh message"
        verbose_name_plural = "mesh traffic"


class MeshRefusal(models.Model):
    """How many frames the mesh's recipients refused, by reason (`mesh.core.security`), summed
    over every process (`manage.py mesh_refusals`, the admin)."""

    reason = models.CharField(primary_key=True, max_length=40)
    count = models.BigIntegerField(default=0)
    last_at = models.DateTimeField()

    class Meta:
        ordering = ["reason"]

    def __str__(self) -> str:
        return f"{self.reason}: {self.count}"
