"""Workspaces, their inbox entries, per-user read state, and legacy notifications."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Workspace(models.Model):
    """A folder on disk an agent works in; its entries go to its owner's inbox.

    The id is random and unguessable: it routes `/mcp/<id>` but is not the secret; the bearer
    token is, and only its SHA-256 is stored (tokens carry 256 random bits, so a fast hash
    is enough and lets every MCP call check it cheaply).
    """

    id = models.CharField(primary_key=True, max_length=64)
    label = models.CharField(max_length=200)
    root = models.CharField(
        max_length=4096, help_text="Absolute folder on disk, symlinks resolved."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspaces"
    )
    session = models.ForeignKey(
        "conversations.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The chat session replies go to when `agent_name` names an agent.",
    )
    agent_name = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="One of the server's own agents (GLOVE_AGENTS) whose session receives "
        "replies as turns; blank: the workspace's MCP client reads them with inbox_read.",
    )
    token_hash = models.CharField(max_length=64, editable=False)
    # The root folder's identity when the workspace was made: a root swapped later (say for
    # a symlink to elsewhere) is another folder, and nothing is read from it.
    root_device = models.BigIntegerField(null=True, blank=True, editable=False)
    root_inode = models.BigIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["label", "id"]
        # The admin's list, by label.
        indexes = [models.Index(fields=["label", "id"], name="workspace_label_idx")]

    def __str__(self) -> str:
        return f"{self.label} ({self.id})"

    @property
    def root_identity(self) -> tuple[int, int] | None:
        if self.root_device is None or self.root_inode is None:
            return None
        return (self.root_device, self.root_inode)


class WorkspaceEntry(models.Model):
    """One push: the seed's `{id, ts, workspaceId, workspaceLabel, docs, comments}`.

    `owner` copies the workspace's owner so a user's history is one index range
    (owner, ts, id) whatever the number of workspaces; `workspace_label` is the label at push
    time, as the seed keeps it.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    ts = models.BigIntegerField(help_text="Epoch milliseconds, stamped by the server.")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="entries")
    workspace_label = models.CharField(max_length=200, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_entries"
    )
    docs = models.JSONField(default=list, blank=True)
    comments = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["-ts", "-id"]
        verbose_name_plural = "workspace entries"
        indexes = [
            # Keyset pagination, newest first: one range scan per page at any depth.
            models.Index(fields=["owner", "ts", "id"], name="ws_entry_owner_keyset"),
            models.Index(fields=["workspace", "ts", "id"], name="ws_entry_workspace_keyset"),
            # The admin's list of every entry, newest first.
            models.Index(fields=["ts", "id"], name="ws_entry_ts_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.workspace_label or self.workspace_id} @ {self.ts}"


class WorkspaceReply(models.Model):
    """What the user wrote back to an entry: the entry's thread, for the workspace's agent.

    `delivered_at` is set once the agent has it: when its MCP client's `inbox_read` returned
    it (each reply once), or when it was queued as a turn of the server agent the workspace
    names (`Workspace.agent_name`).
    """

    class DeliveredTo(models.TextChoices):
        MCP = "mcp", "the workspace's MCP client"
        AGENT = "agent", "the workspace's server agent"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    entry = models.ForeignKey(WorkspaceEntry, on_delete=models.CASCADE, related_name="replies")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="replies")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = models.TextField()
    ts = models.BigIntegerField(help_text="Epoch milliseconds, stamped by the server.")
    delivered_at = models.DateTimeField(null=True, blank=True)
    delivered_to = models.CharField(
        max_length=10, choices=DeliveredTo.choices, blank=True, default=""
    )

    class Meta:
        ordering = ["ts", "id"]
        verbose_name_plural = "workspace replies"
        indexes = [
            # inbox_read's "what has the agent not read yet": a short range per workspace.
            models.Index(
                fields=["workspace", "ts"],
                condition=models.Q(delivered_at__isnull=True),
                name="ws_reply_undelivered",
            ),
            models.Index(fields=["entry", "ts"], name="ws_reply_thread"),
        ]

    def __str__(self) -> str:
        return f"reply to {self.entry_id} @ {self.ts}"


class WorkspaceEntryRead(models.Model):
    """Server-side read state: follows the user across browsers (OpenAlice #444)."""

    entry = models.ForeignKey(WorkspaceEntry, on_delete=models.CASCADE, related_name="reads")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    read_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "user"], name="ws_entry_read_once"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} read {self.entry_id}"


class Notification(models.Model):
    """Legacy `notify_user`: a one-shot message snapshotted when it was sent."""

    class Urgency(models.TextChoices):
        INFO = "info"
        IMPORTANT = "important"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    text = models.TextField()
    urgency = models.CharField(max_length=10, choices=Urgency.choices, default=Urgency.INFO)
    source = models.CharField(max_length=20, default="manual")
    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "created_at"], name="notification_user_time"),
            # The admin's list, newest first.
            models.Index(fields=["created_at", "id"], name="notification_created_idx"),
            # The admin's filters, newest first, whatever the value.
            models.Index(fields=["urgency", "created_at", "id"], name="notification_urgency_idx"),
            models.Index(fields=["source", "created_at", "id"], name="notification_source_idx"),
        ]

    def __str__(self) -> str:
        return self.text[:60]
