"""The live event log: one table for every stream (sessions, workspace inboxes, mesh agents)."""

from __future__ import annotations

from django.db import models


class LiveEvent(models.Model):
    """A change announced to live pages, written in the same transaction as the change.

    Each server process's relay hands new rows to its own sockets of the stream; a
    reconnecting client replays from the last id it saw. `stream` names the audience
    (`live.streams`): `session:<id>`, `workspace:<id>` or `mesh:<agent id>`.
    """

    stream = models.CharField(max_length=200)
    type = models.CharField(max_length=100)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        # The table and index keep the names they had when the model lived in conversations
        # (moved state-only, see live/migrations/0001): existing databases keep their rows.
        db_table = "conversations_liveevent"
        indexes = [
            models.Index(fields=["stream", "id"], name="conversatio_stream_b5fa2a_idx"),
            # The admin's filter by type, newest first (a rare type is a few rows of millions).
            models.Index(fields=["type", "id"], name="liveevent_type_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.stream} {self.type} #{self.pk}"
