"""The live event log: one table for every stream (sessions, workspace inboxes, mesh agents)."""

from __future__ import annotations

from django.db import models


class LiveEvent(models.Model):
    """A change announced to live pages, written in the same transaction as the change.

    Each server process's relay hands new rows to its own sockets of the stream; a
    reconnecting client replays from the last id it saw. `stream` names the audience
    (`live.streams`): `session:<id>`, `workspace:<id>` or `mesh:<agent id>`.

    A client sees `seq`, the event's number in its stream (1, 2, 3... with no gaps), never
    the primary key: the key is one sequence for every stream, whose gaps would tell a
    client how busy the others are. The relay tails the table by the key, internally.
    """

    stream = models.CharField(max_length=200)
    seq = models.BigIntegerField()
    type = models.CharField(max_length=100)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        # The table and the first index keep the names they had when the model lived in
        # the conversations app.
        db_table = "conversations_liveevent"
        indexes = [
            models.Index(fields=["stream", "id"], name="conversatio_stream_b5fa2a_idx"),
            # Replay: a stream's events after a client's number.
            models.Index(fields=["stream", "seq"], name="liveevent_stream_seq_idx"),
            # The admin's filter by type, newest first (a rare type is a few rows of millions).
            models.Index(fields=["type", "id"], name="liveevent_type_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.stream} {self.type} #{self.seq}"


class LiveStreamCounter(models.Model):
    """A stream's last event number (`LiveEvent.seq`), advanced in the transaction that
    writes its events: the next number without a max(seq) over every day's partition.

    Rows are kept when retention prunes the stream's events (one small row per stream), so
    a stream's numbers never restart and a client's old cursor is told to resync rather
    than matched against new events.
    """

    stream = models.CharField(max_length=200, primary_key=True)
    last_seq = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.stream} #{self.last_seq}"
