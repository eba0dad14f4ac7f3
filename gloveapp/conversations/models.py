"""What the runtime produces, persisted: sessions, their messages, tasks and permissions,
plus the event log that carries live updates to the pages (the transactional outbox)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Answerer(models.TextChoices):
    AGENT = "agent", "the agent"
    QUEUED = "queued", "waiting for a person"
    PERSON = "person", "a person"
    CLOSED = "closed", "closed"


class Session(models.Model):
    """One conversation with one agent.

    Two names: `id`, global, is the runtime store's `identifier` and what staff, the admin
    and every table below use; `key` is the id its owner chose and addresses it by, unique
    per owner. They are equal unless the id asked for was taken (or once used) by someone
    else: then the session gets a fresh `id`, and the owner, who still sees only `key`,
    learns nothing about another user's ids (`services.session_create`).
    """

    id = models.CharField(primary_key=True, max_length=128)
    key = models.CharField(max_length=128)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="glove_sessions",
        db_index=False,  # (owner, key) below starts with it
    )
    title = models.CharField(max_length=200, blank=True, default="")
    agent_name = models.CharField(max_length=100, blank=True, default="")
    # A subagent's conversation: the session whose agent delegated it, and the tool call
    # that did (one child per call, so a delegation retried after a restart finds its child).
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    parent_call_id = models.CharField(max_length=200, blank=True, default="")
    token_count = models.BigIntegerField(default=0)
    turn_count = models.IntegerField(default=0)
    # Cumulative consumption, never reset by compaction (statistics for people).
    tokens_in_total = models.BigIntegerField(default=0)
    tokens_out_total = models.BigIntegerField(default=0)
    cache_creation_input_tokens_total = models.BigIntegerField(default=0)
    cache_read_input_tokens_total = models.BigIntegerField(default=0)
    # The highest message `seq` given out: an append takes its numbers from this row in the
    # same statement that locks it, instead of reading max(seq) in another round trip.
    last_seq = models.PositiveIntegerField(default=0, editable=False)
    # The messages a person sent (`PERSON_MESSAGE`), counted by the append that stores them,
    # in the same statement: the chat list shows it per chat without reading any history.
    person_message_count = models.PositiveIntegerField(default=0, editable=False)
    # Who answers the chat (`conversations.handoff`, the one module that changes these):
    # the agent, the queue of a group of staff, one staff member, or nobody (closed).
    answerer = models.CharField(
        max_length=8, choices=Answerer.choices, default=Answerer.AGENT, editable=False
    )
    answerer_group = models.CharField(max_length=150, blank=True, default="", editable=False)
    answerer_person = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,  # the partial index below
        editable=False,
    )
    answerer_since = models.DateTimeField(null=True, blank=True, editable=False)
    # The turn whose agent asked for a person (`glove_request_human`): its own closing
    # writes still land while the chat waits in the queue; no other turn's do.
    answerer_turn_id = models.BigIntegerField(null=True, blank=True, editable=False)
    # The first message of the human stretch (the hand-back note names it and the last).
    handoff_from_seq = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # When the customer of a queued chat was told nobody could answer in time (once per
    # stay in the queue: `handoff_bounds.queue_overdue_sweep`).
    queue_told_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        # No index holds a column an append changes (updated_at, last_seq, title, the
        # counters), so PostgreSQL rewrites the row in place (a HOT update): an index on
        # updated_at made every append write five index entries and left the hot row's
        # dead versions for every later append to step over.
        constraints = [
            # The owner's routes find a session by (owner, key): one probe of this index.
            models.UniqueConstraint(fields=["owner", "key"], name="session_unique_owner_key"),
            # A row written without its key would be unreachable by its owner: refuse it.
            models.CheckConstraint(condition=~models.Q(key=""), name="session_key_not_empty"),
            models.UniqueConstraint(
                fields=["parent", "parent_call_id"],
                condition=models.Q(parent__isnull=False),
                name="session_one_child_per_call",
            ),
        ]
        indexes = [
            # The owner's list, newest first, paged by (created_at, key) (`selectors.
            # sessions_page`): columns an append never changes, so appends stay HOT. The
            # admin's search by an owner's username runs on it too.
            models.Index(fields=["owner", "-created_at", "-key"], name="session_owner_created_idx"),
            # The admin's list, newest first (columns an append never changes: its updates
            # stay HOT), and the same for one agent's sessions.
            models.Index(fields=["created_at", "id"], name="session_created_idx"),
            models.Index(fields=["agent_name", "created_at"], name="session_agent_created_idx"),
            # The admin's "has a parent" filter: sub-agents' sessions, newest first.
            models.Index(
                fields=["created_at", "id"],
                condition=models.Q(parent__isnull=False),
                name="session_child_created_idx",
            ),
            # The staff console's queue of one group, longest waiting first, and each staff
            # member's own chats: small partial indexes (most chats are the agent's).
            models.Index(
                fields=["answerer_group", "answerer_since", "id"],
                condition=models.Q(answerer="queued"),
                name="session_queued_idx",
            ),
            models.Index(
                fields=["answerer_person", "answerer_since", "id"],
                condition=models.Q(answerer="person"),
                name="session_person_idx",
            ),
            # The queue bound's sweep: queued chats nobody was told about, oldest first.
            models.Index(
                fields=["agent_name", "answerer_since"],
                condition=models.Q(answerer="queued", queue_told_at__isnull=True),
                name="session_queue_untold_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.id


class RetiredSessionKey(models.Model):
    """A deleted session's key: its owner cannot create that id again (a 409, as for a
    session they still have), so an owner's ids are never reused either."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=128)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="retired_session_key_unique")
        ]

    def __str__(self) -> str:
        return self.key


# What a person calls "a message I sent": a user message with text that is not a tool's
# result, a compaction summary, a skill or a framework banner (the inbox's). Turns are
# counted and chats titled by these.
PERSON_MESSAGE = (
    models.Q(sender="user", is_compaction=False, is_skill_injection=False)
    & models.Q(framework_context__isnull=True, tool_results__isnull=True)
    & ~models.Q(text="")
)


def is_person_message(values: dict) -> bool:
    """PERSON_MESSAGE for a message's column values not yet written (the append titles a
    chat by it in the same statement); keep the two in step."""
    return (
        values.get("sender") == "user"
        and not values.get("is_compaction")
        and not values.get("is_skill_injection")
        and values.get("framework_context") is None
        and values.get("tool_results") is None
        and bool(values.get("text"))
    )


class Message(models.Model):
    """One Glove message. `seq` orders a session's history; compaction markers stay in it."""

    SENDERS = [("user", "user"), ("agent", "agent")]

    # No index of its own: `message_unique_seq` (session, seq) starts with it.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    seq = models.PositiveIntegerField()
    sender = models.CharField(max_length=5, choices=SENDERS)
    msg_id = models.CharField(max_length=200, blank=True, null=True)
    text = models.TextField(blank=True, default="")
    content = models.JSONField(null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_results = models.JSONField(null=True, blank=True)
    is_compaction = models.BooleanField(default=False)
    is_skill_injection = models.BooleanField(default=False)
    framework_context = models.CharField(max_length=50, null=True, blank=True)
    reasoning_content = models.TextField(null=True, blank=True)
    # The message's fields the runtime does not interpret (Glove's `provider_options`,
    # `pre_modified_text`, future ones), returned verbatim.
    extra = models.JSONField(null=True, blank=True)
    # The agent version whose turn wrote it (`versions.AgentVersion`; null: no version was
    # published, or no agent turn wrote it: a person, a remote store's client). No index
    # and no constraint: this is the hottest insert, and versions are never deleted.
    agent_version = models.ForeignKey(
        "versions.AgentVersion",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    # The message as the REST GET sends it (`Message.to_dict()`, rendered as DRF's JSON
    # renderer renders it), written with the row: a history is served by joining these
    # texts, without rebuilding each message (`selectors.read_owned_messages_json`).
    # NULL only for a row written before it existed, read back from the columns.
    wire = models.TextField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_unique_seq"),
        ]
        indexes = [
            # "Where does the model's context start?" is one index probe.
            models.Index(
                fields=["session", "-seq"],
                condition=models.Q(is_compaction=True),
                name="message_compaction_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.sender}"


class Task(models.Model):
    STATUSES = [("pending", "pending"), ("in_progress", "in progress"), ("completed", "completed")]

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0)
    content = models.TextField()
    active_form = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=STATUSES, default="pending")

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "task_id"], name="task_unique_id"),
        ]

    def __str__(self) -> str:
        return self.content


class Permission(models.Model):
    """A remembered answer to a tool's permission prompt, keyed like Glove's `permissionKey`."""

    STATUSES = [("granted", "granted"), ("denied", "denied"), ("unset", "unset")]

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="permissions")
    key = models.TextField()
    tool_name = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=STATUSES, default="unset")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="permission_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.key} = {self.status}"


class KeptToolResult(models.Model):
    """The whole of a tool result that was cut to GLOVE_TOOL_RESULT_MAX_BYTES in the
    conversation (`core.results`), gzip-compressed, for its owner and staff to download.
    Kept as long as its session (`conversations.kept_results`)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    size = models.PositiveBigIntegerField()  # bytes of the UTF-8 JSON, before compression
    content = models.BinaryField()  # gzip of the UTF-8 JSON
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "call_id"], name="kept_tool_result_unique_call"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.call_id} ({self.size} bytes)"


class IdempotentRequest(models.Model):
    """The first answer to a write sent with an `Idempotency-Key` (`conversations.idempotency`).

    One row per (user, key), written in the write's own transaction: a retry of an
    acknowledged request finds it and gets that answer back, storing nothing new, and a
    concurrent duplicate waits until the first commits (then finds it) or rolls back (then
    runs itself). `answer` is null while a streamed answer is under way.

    On PostgreSQL the table is partitioned by day of `created_at` (gloveapp/lib/db/partitions.py):
    its key is (id, created_at), and the unique (user, key) below is a unique index per
    day, kept across days by the advisory lock `idempotency._claim` takes on the key.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    # What the key was first used for (the route and its target) and a hash of the request:
    # the same key sent with another request is refused, not answered with the first's.
    scope = models.CharField(max_length=300)
    fingerprint = models.CharField(max_length=64)
    answer = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="one_request_per_idempotency_key"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.scope})"


class HandoffRecord(models.Model):
    """The audit of a chat's human stretches: each change of who answers (who, when, why)
    and the staff's internal notes, which never reach the customer or the model."""

    class Kind(models.TextChoices):
        REQUESTED = "requested", "asked for a person"
        CLAIMED = "claimed", "claimed"
        TAKEN_OVER = "taken_over", "taken over"
        HANDED_BACK = "handed_back", "handed back"
        CLOSED = "closed", "closed"
        NOTE = "note", "internal note"
        OVERDUE = "overdue", "nobody answered in time"

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="handoff_records", db_index=False
    )
    kind = models.CharField(max_length=12, choices=Kind.choices)
    # The state it left and entered ("" for a note).
    from_state = models.CharField(max_length=8, blank=True, default="")
    to_state = models.CharField(max_length=8, blank=True, default="")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who, in words, when no user acted ("agent", "rule: 3 failed turns", "api").
    actor_label = models.CharField(max_length=150, blank=True, default="")
    via = models.CharField(max_length=20, blank=True, default="")
    group = models.CharField(max_length=150, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    text = models.TextField(blank=True, default="")  # a note, a hand-back's summary
    from_seq = models.PositiveIntegerField(null=True, blank=True)
    to_seq = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "id"]
        indexes = [
            models.Index(fields=["session", "id"], name="handoff_record_session_idx"),
            # The usage page's window of handoffs, across chats.
            models.Index(fields=["created_at"], name="handoff_record_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.kind}"
