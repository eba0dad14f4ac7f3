"""A chat turn and the prompts it shows, as rows every process shares.

The `Turn` table is the per-session queue: a message is a queued turn, and a partial unique
index lets at most one turn of a session be `running` at a time, whichever process or worker
claims it. The Django task that a message enqueues only says "look at this session"; the
claim on this table decides who runs what, so a lost or duplicated task never runs a turn
twice or out of order.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from gloveapp.conversations.models import Session

# Turns that still run or will: the partial index's condition, and what readers call busy.
# "waiting" is a turn parked on a person (`Turn.Status.WAITING`).
UNFINISHED = ["queued", "running", "waiting"]
# Turns that end with a note in the transcript ("stopped", "failed"): `ended_turn_notes`.
ENDED_WITH_NOTE = ["cancelled", "failed"]
FINISHED = ["done", "failed", "cancelled"]


class Turn(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        # Parked on a person (an approval, a permission prompt, a slot that waits for an
        # answer): no worker, no lease, no worker slot; an answer, a decision, a Stop or an
        # expiry puts it back on the queue (`parking.turn_unpark`).
        WAITING = "waiting"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    # No index of their own: (session, id) and (user, created_at) below serve them.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="turns", db_index=False
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, db_index=False
    )
    text = models.TextField()
    source = models.CharField(max_length=20, default="page")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # How many times a worker claimed it: above 1 it was restarted after a worker stopped.
    attempts = models.PositiveSmallIntegerField(default=0)
    # How many of those claims continued it after a wait on a person (not a restart).
    resumes = models.PositiveSmallIntegerField(default=0)
    # Why it is queued (or was, for the attempt that runs): its worker stopped and the lease
    # ran out (a restart). Set by the takeback, cleared when an answer unparks it, so a
    # continuation after a wait is no retry, even of a turn restarted once before.
    restarting = models.BooleanField(default=False)
    worker_id = models.CharField(max_length=64, blank=True, default="")
    # A running turn whose lease passes is taken back by another worker (its worker died).
    lease_until = models.DateTimeField(null=True, blank=True)
    # The session's last message seq before the turn stored anything: a retry resumes from
    # the stored conversation when the request is already past it.
    base_seq = models.PositiveIntegerField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Who pressed Stop (or withdrew a queued message), and when: the transcript says so.
    stopped_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    stopped_at = models.DateTimeField(null=True, blank=True)
    # The session's last message seq when the turn ended: where its note goes in a transcript.
    end_seq = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # What the page says about the turn besides its reply (an MCP server that was down).
    notice = models.TextField(blank=True, default="")
    task_id = models.CharField(max_length=64, blank=True, default="")
    # The W3C traceparent of the request that posted the turn: its worker's spans join that
    # trace (empty when tracing is off).
    trace_parent = models.CharField(max_length=64, blank=True, default="")
    # The model the finishing attempt talked to and the tokens the turn's attempts used:
    # each attempt that parks on a person or finishes adds its own (one whose worker died
    # took its count with it). The turn's cost is this usage priced by GLOVE_MODEL_PRICES.
    # No index holds them, so the row is rewritten in place.
    model = models.CharField(max_length=200, blank=True, default="")
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    # The agent version it runs on, read from the agent's published pointer when it was
    # queued (null: the code's factory alone); its retries run on the same one.
    agent_version = models.ForeignKey(
        "versions.AgentVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        # Few indexes, and none on `lease_until`: a heartbeat (every lease/3 seconds for
        # each running turn) changes only that column, so it stays a HOT update (no index
        # entry written; PostgreSQL) when no index covers it. Taking back expired leases
        # reads the running turns through the partial unique index below and checks their
        # lease on the row: a handful of rows, whatever the table's size.
        indexes = [
            # The newest turn of a session, its turns in order, cascades from a session.
            models.Index(fields=["session", "id"], name="turn_session_newest_idx"),
            # What runs or waits to run, per session, in order: the claim, the queue's
            # length, the page's busy state. Small: finished turns leave it.
            models.Index(
                fields=["session", "id"],
                condition=Q(status__in=UNFINISHED),
                name="turn_session_unfinished_idx",
            ),
            # The stopped and failed turns whose note one page of a chat shows
            # (`selectors.ended_turn_notes`, by `end_seq`): a long chat's finished turns are
            # many, these few. Partial: a turn enters it once, when it ends so; a heartbeat
            # touches none of its columns.
            models.Index(
                fields=["session", "end_seq"],
                condition=Q(status__in=ENDED_WITH_NOTE, end_seq__isnull=False),
                name="turn_session_note_idx",
            ),
            # A user's turns in the last minute (the rate limit); deleting a user.
            models.Index(fields=["user", "created_at"]),
            # The admin's filters, newest first whatever the value (a rare one above all:
            # `?source=api`, `?status=failed`, `?retried=yes` would otherwise walk every turn).
            # The finished turns only: a turn enters it once, as it ends (the unfinished ones
            # are the partial index above's few rows).
            models.Index(
                fields=["status", "id"], condition=Q(status__in=FINISHED), name="turn_status_idx"
            ),
            models.Index(fields=["source", "id"], name="turn_source_idx"),
            models.Index(fields=["id"], condition=Q(attempts__gt=1), name="turn_retried_idx"),
            # Deleting a user who once pressed Stop (most turns have nobody here).
            models.Index(
                fields=["stopped_by"],
                condition=Q(stopped_by__isnull=False),
                name="turn_stopped_by_idx",
            ),
        ]
        constraints = [
            # The rule "one turn at a time per session", held by the database itself.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status="running"),
                name="one_running_turn_per_session",
            )
        ]

    # Not stored: the worker that ran the attempt before this retry, as its timeline step
    # says ("" when none); the claim (`claim.turn_claim_next`) sets it for the retry's span.
    previous_worker: str = ""

    def __str__(self) -> str:
        return f"turn {self.pk} of {self.session_id} ({self.status})"

    @property
    def retried(self) -> bool:
        """This attempt restarts the turn after a worker stopped (a continuation after a
        wait is not a retry)."""
        return self.restarting

    @property
    def continues(self) -> bool:
        """An earlier attempt ran: this one resumes from the stored conversation."""
        return self.attempts > 1


# A turn not finished: queued, running, or parked on a person.
LIVE_STATUSES = (Turn.Status.QUEUED, Turn.Status.RUNNING, Turn.Status.WAITING)


class SessionUsage(models.Model):
    """What a session's turns used, per model: the finishing UPDATE of each turn adds its
    usage here in the same transaction, so a session's cost is read from a row per model,
    never from its turns (a long chat has tens of thousands: docs/explanation/scale.md).
    Kept when turns are pruned (GLOVE_RETAIN_*): the cost of a chat stays known."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=200, blank=True, default="")
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "model"], name="session_usage_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.model or '(no model)'}"


class TurnWebhook(models.Model):
    """The outbox of a turn's completion webhook: the turn asked to be told when it ends.

    Written with the turn (`waiting`); its end moves it to `pending` in the end's own
    transaction, one conditional update, so each turn's end is due once whatever retries
    around it (a worker's death, a restart); the turn worker's scheduler delivers it, signed,
    retried with backoff (`turns.webhooks`). Kept as long as its turn (a cascade of the turns'
    retention)."""

    class Status(models.TextChoices):
        WAITING = "waiting"  # its turn has not ended
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    turn = models.OneToOneField(
        Turn, on_delete=models.CASCADE, primary_key=True, related_name="webhook"
    )

    class Kind(models.TextChoices):
        GLOVE = "glove"  # the `turn.ended` body
        A2A = "a2a"  # an A2A push notification: the task, and the client's token

    kind = models.CharField(max_length=5, choices=Kind.choices, default=Kind.GLOVE)
    url = models.URLField(max_length=2000)
    # A2A: the push config's id and the token its client asked to get back.
    config_id = models.CharField(max_length=100, blank=True, default="")
    token = models.CharField(max_length=500, blank=True, default="")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.WAITING)
    # The turn's end as the body names it: done, failed or cancelled.
    outcome = models.CharField(max_length=10, blank=True, default="")
    ended_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [
            # The due deliveries: few rows, whatever the table's size.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status__in=["pending", "sending"]),
                name="turn_webhook_due_idx",
            )
        ]

    def __str__(self) -> str:
        return f"turn {self.turn_id} webhook ({self.status})"


class TurnPush(models.Model):
    """One A2A push notification of a turn whose task has a push config (its `TurnWebhook`
    of kind `a2a`): a row per state change A2A pushes (`input-required` for each prompt
    that asks its caller, and the end), written in the transaction of the change itself and
    unique by `(turn, event)`, so each change is due once whatever retries around it; the
    turn worker's scheduler delivers it as the completion webhook is delivered
    (`turns.task_pushes`). Kept as long as its turn."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="pushes")
    # What changed: "input-required:<slot id>", or "ended".
    event = models.CharField(max_length=100)
    # The task's state in A2A's words (TASK_STATE_INPUT_REQUIRED, TASK_STATE_COMPLETED...).
    state = models.CharField(max_length=40)
    happened_at = models.DateTimeField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "event"], name="turn_push_once_per_event")
        ]
        indexes = [
            # The due deliveries: few rows, whatever the table's size.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status__in=["pending", "sending"]),
                name="turn_push_due_idx",
            )
        ]

    def __str__(self) -> str:
        return f"turn {self.turn_id} push {self.event} ({self.status})"


class TurnSlot(models.Model):
    """A display slot (a prompt or a card) a running turn pushed; answered from any process."""

    class Status(models.TextChoices):
        OPEN = "open"
        ANSWERED = "answered"  # an answer waits for the worker to take it
        RESOLVED = "resolved"
        REJECTED = "rejected"
        EXPIRED = "expired"  # its turn died or ended without it being answered

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="slots")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turn_slots")
    slot_id = models.CharField(max_length=64)
    renderer = models.CharField(max_length=100)
    input = models.JSONField(null=True, blank=True)
    tool_name = models.CharField(max_length=100, null=True, blank=True)
    call_id = models.CharField(max_length=200, null=True, blank=True)
    display_strategy = models.CharField(max_length=30, default="stay")
    waits_for_answer = models.BooleanField(default=False)
    template = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    answer = models.JSONField(null=True, blank=True)
    # Who answered it and through which edge (`page`, `rest`): its wait's span and step say.
    # An approval's decider is its ApprovalDecision's.
    answered_by = models.CharField(max_length=150, blank=True, default="")
    answered_via = models.CharField(max_length=10, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "slot_id"], name="one_row_per_turn_slot")
        ]
        indexes = [models.Index(fields=["session", "status"])]

    def __str__(self) -> str:
        return f"slot {self.slot_id} of {self.session_id} ({self.status})"


class MeshPeer(models.Model):
    """A session that is a mesh peer's inbox (`run_agent NAME --mesh-id ID` keeps it).

    Its wake-up turns run on a turn worker like chat turns; the worker reads here which mesh
    id and transport the turn's agent sends with (`run_agent` itself receives).
    """

    session = models.OneToOneField(
        Session, primary_key=True, on_delete=models.CASCADE, related_name="mesh_peer"
    )
    mesh_id = models.CharField(max_length=128, unique=True)
    transport = models.CharField(max_length=100, default="default")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    capabilities = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"mesh peer {self.mesh_id} ({self.session_id})"


class TurnStep(models.Model):
    """One step of a turn, stored as the turn runs (its timeline): an attempt (which worker
    claimed the turn, the first or a retry), a model call, a tool call, a wait on a person.

    Written inside the turn's fence, so a worker that lost the turn writes none; at most
    GLOVE_TIMELINE_MAX_STEPS per attempt, and kept GLOVE_RETAIN_TURN_STEPS_DAYS (the turn
    worker's scheduler deletes older ones; they go with their turn too).
    """

    class Kind(models.TextChoices):
        ATTEMPT = "attempt"
        MODEL = "model"
        TOOL = "tool"
        WAIT = "wait"

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="steps")
    attempt = models.PositiveSmallIntegerField()
    worker_id = models.CharField(max_length=64, blank=True, default="")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # The model, the tool, the kind of wait (approval, permission, a slot's renderer).
    name = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField()
    # Null while it runs (an attempt whose worker died never gets one).
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # success | error | aborted | resolved | rejected | expired | done | failed | cancelled
    outcome = models.CharField(max_length=20, blank=True, default="")
    # Tokens and finish reason of a model call, a tool call's id, a wait's answer channel.
    detail = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["turn_id", "started_at", "id"]
        indexes = [
            models.Index(fields=["turn", "started_at"]),
            # The scheduler's retention sweep.
            models.Index(fields=["started_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} of turn {self.turn_id}"


class UsageDay(models.Model):
    """One day of the admin's usage page, summed from that day's turn steps by
    `turns.usage_rollup` (the turn worker's scheduler, or `manage.py usage_rollup`): the
    page reads a row a day, whatever the steps' number, and the days outlive the steps'
    retention. `summary` is `usage_rollup.DaySummary`'s fields."""

    day = models.DateField(primary_key=True)
    summary = models.JSONField()
    steps = models.PositiveIntegerField(default=0)  # the steps it was summed from
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["day"]

    def __str__(self) -> str:
        return f"usage of {self.day}"
