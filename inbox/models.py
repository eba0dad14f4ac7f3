"""The Glove inbox persisted: async requests an agent posts and the outside world resolves."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# The admin's order: pending first, then resolved, then the rest; newest first in each. An
# index holds exactly these expressions (`inbox_admin_order_idx`), so a page of the list is a
# range scan of it at any size; the two must stay the same.
PENDING_FIRST = models.Case(
    models.When(status="pending", then=models.Value(0)),
    models.When(status="resolved", then=models.Value(1)),
    default=models.Value(2),
    output_field=models.IntegerField(),
)
ADMIN_ORDER = (PENDING_FIRST.asc(), models.F("created_at").desc(), models.F("id").desc())
# What a tag says an item is (mesh §9.4): the admin's kinds, and the mesh's traffic.
MESH_TAG = "mesh:"
MESH_KINDS = {
    "mesh_direct": "mesh:from:",
    "mesh_broadcast": "mesh:broadcast:",
    "waiting": "mesh:waiting:",
}


def admin_order_index(name: str, *leading: str, condition: models.Q | None = None) -> models.Index:
    """An index in the admin's order (ADMIN_ORDER) after `leading` columns an equality
    filter fixes, or over the rows of `condition` only: a filtered page (a rare value's
    most of all) is one range of it, never a walk of every item."""
    return models.Index(
        *(models.F(column) for column in leading),
        PENDING_FIRST,
        models.F("created_at").desc(),
        models.F("id").desc(),
        name=name,
        condition=condition,
    )


class InboxItem(models.Model):
    """pending -> resolved -> consumed (or pending -> consumed when withdrawn).

    Two names, as sessions have: `id` is global, because resolvers (staff, webhooks, the
    command line) name an item by id alone; `key` is the id the session's side chose (Glove's
    `inbox_<ms>_<rand>`), unique within the session, and all that side ever sees (its store,
    its REST routes, its live events). They are equal unless the id was already taken by
    another session's item: then the item gets a fresh `id` (`services.inbox_item_add`).
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        RESOLVED = "resolved"
        CONSUMED = "consumed"

    class ResolvedBy(models.TextChoices):
        USER = "user"
        WEBHOOK = "webhook"
        COMMAND = "command"
        API = "api"
        MESH = "mesh"
        EXPIRY = "expiry"
        AGENT = "agent"

    id = models.CharField(primary_key=True, max_length=128)
    key = models.CharField(max_length=128)
    session = models.ForeignKey(
        "conversations.Session", on_delete=models.CASCADE, related_name="inbox_items"
    )
    tag = models.CharField(max_length=200)
    request = models.TextField()
    response = models.TextField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    blocking = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    consumed_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=10, choices=ResolvedBy.choices, null=True, blank=True)
    resolved_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="resolved_inbox_items",
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    # What a person may answer with (gloveapp.core.approvals.inbox.INBOX_DECISIONS); null is a text
    # response only (Glove's). `decision` is the one taken (null: expired, or written by the
    # session's side); `response` is what the agent reads either way.
    decisions = models.JSONField(null=True, blank=True)
    decision = models.CharField(max_length=10, null=True, blank=True)
    # The W3C traceparent of the resolution's span (empty when its process traces nothing):
    # the turn that consumes the item links its wait span to it, across processes.
    trace_parent = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            # A session's items by status, in order: the open ones, and the consumed ones a
            # page at a time, newest first (`selectors.consumed_inbox_page`), by one range.
            models.Index(
                fields=["session", "status", "created_at", "key"],
                name="inbox_session_status_idx",
            ),
            models.Index(fields=["status", "created_at"]),
            models.Index(
                PENDING_FIRST,
                models.F("created_at").desc(),
                models.F("id").desc(),
                name="inbox_admin_order_idx",
            ),
            models.Index(
                fields=["expires_at"],
                condition=models.Q(status="pending"),
                name="inbox_pending_expiry_idx",
            ),
            # The admin's filters, each value a range in the admin's order: by status, by
            # who resolved it, the blocking ones, the mesh's traffic (a few in a million
            # items) and each of its kinds; by day, a range of `created_at`.
            admin_order_index("inbox_admin_status_idx", "status"),
            admin_order_index("inbox_admin_resolved_by_idx", "resolved_by"),
            admin_order_index("inbox_admin_blocking_idx", condition=models.Q(blocking=True)),
            admin_order_index("inbox_admin_mesh_idx", condition=models.Q(tag__startswith=MESH_TAG)),
            admin_order_index(
                "inbox_admin_mesh_tag_idx", "tag", condition=models.Q(tag__startswith=MESH_TAG)
            ),
            # Mesh traffic by status: a status no mesh item holds is an empty range, where
            # the status index walked every item of that status looking for mesh ones.
            admin_order_index(
                "inbox_admin_mesh_status_idx",
                "status",
                condition=models.Q(tag__startswith=MESH_TAG),
            ),
            *(
                admin_order_index(
                    f"inbox_admin_{kind}_idx", condition=models.Q(tag__startswith=prefix)
                )
                for kind, prefix in MESH_KINDS.items()
            ),
            models.Index(fields=["created_at", "id"], name="inbox_created_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="inbox_unique_session_key"),
            models.CheckConstraint(condition=~models.Q(key=""), name="inbox_key_not_empty"),
        ]

    def __str__(self) -> str:
        return f"[{self.tag}] {self.request[:60]}"


class UsedWebhookSignature(models.Model):
    """A signed webhook request that was accepted: the same signature is refused after it.

    Signatures are accepted only within GLOVE_WEBHOOK_MAX_SKEW_SECONDS of their timestamp, so
    a row older than that window can never match again; the approvals' sweep prunes them
    (`inbox.webhooks.used_signatures_prune`)."""

    digest = models.CharField(max_length=64, primary_key=True)  # sha256 of the signature
    used_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.digest[:12]}… at {self.used_at:%Y-%m-%d %H:%M:%S}"


# The workspace inbox's models live in their own module; importing them here registers them
# with the inbox app.
from inbox.workspaces.models import (  # noqa: E402
    Notification,
    Workspace,
    WorkspaceEntry,
    WorkspaceEntryRead,
    WorkspaceReply,
)

__all__ = [
    "InboxItem",
    "Notification",
    "UsedWebhookSignature",
    "Workspace",
    "WorkspaceEntry",
    "WorkspaceEntryRead",
    "WorkspaceReply",
]
