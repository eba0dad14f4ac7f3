"""Agent versions and the replays that try them, as rows every process shares.

An `AgentVersion` is what staff may change of one agent (its system prompt, model and model
settings, the tools and MCP servers it offers, its tools' approval parameters, its budgets),
frozen: a
version is never edited, a change is a new version. The code's factory (GLOVE_AGENTS) stays
the base; a version overrides what it sets (`spec.versioned_spec`).

An `AgentPointer` is an agent's draft and published versions: publishing and rolling back
move a pointer (`services`), and the next turn reads it. Each move is a `VersionPublication`,
the audit a rollback reads.

A `ReplayRun` runs recorded conversations again against a version; each conversation's
outcome is a `ReplayResult` (one per run and session, so a resumed run redoes only what is
missing). The recording is never written to.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class AgentVersion(models.Model):
    agent_name = models.CharField(max_length=100)
    # 1, 2, 3... per agent: what people call it ("coffee v3").
    number = models.PositiveIntegerField()
    system_prompt = models.TextField()
    # A "provider:model" spec; empty: the code's (the agent's own, else GLOVE_MODEL).
    model = models.CharField(max_length=200, blank=True, default="")
    # Keyword arguments for the model's adapter (temperature, max_tokens...).
    model_settings = models.JSONField(default=dict, blank=True)
    # The names of the tools and of the MCP servers it offers; null: all the code's.
    tools = models.JSONField(null=True, blank=True)
    mcp_servers = models.JSONField(null=True, blank=True)
    # Per tool, the approval parameters that replace the tool's declared ones
    # ({"checkout": {"assignee_group": "managers", "expire_after": 600}}).
    approval_policies = models.JSONField(default=dict, blank=True)
    # Budgets of this agent, in GLOVE_BUDGETS' form (`budgets.rules.version_rules`): they
    # apply while the version is the one a turn runs on.
    budgets = models.JSONField(default=list, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent_name", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["agent_name", "number"], name="version_number_unique")
        ]

    def __str__(self) -> str:
        return f"{self.agent_name} v{self.number}"


class AgentPointer(models.Model):
    """An agent's draft (what staff edit) and published version (what turns run on)."""

    agent_name = models.CharField(max_length=100, primary_key=True)
    draft = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    published = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The checks every replay of this agent runs, written once (`report.parse_checks`).
    checks = models.TextField(blank=True, default="")
    # Publishing asks a person first, in /approvals/, with the replay report linked
    # (`promotion`); off: staff who may change the agent publish at once.
    publish_needs_approval = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.agent_name


class VersionPublication(models.Model):
    """One move of an agent's published pointer: who published which version, when, why."""

    class Kind(models.TextChoices):
        PUBLISHED = "published"
        ROLLED_BACK = "rolled_back", "rolled back"

    agent_name = models.CharField(max_length=100)
    # The version published by this move (null: none, the code's factory alone).
    version = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The version published before it (null: the code's factory alone).
    previous = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    kind = models.CharField(max_length=12, choices=Kind.choices)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The replay that showed what the version changes, when one was linked.
    replay_run = models.ForeignKey(
        "ReplayRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["agent_name", "-id"], name="publication_agent_idx")]

    def __str__(self) -> str:
        return f"{self.agent_name}: {self.kind} {self.version}"


class ReplayRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    version = models.ForeignKey(AgentVersion, on_delete=models.PROTECT, related_name="replays")
    # How the conversations were chosen, in words ("ids", "sample of 20", "filter ?q=...").
    selection = models.CharField(max_length=500, blank=True, default="")
    # The chosen sessions' ids, in order: fixed when the run is made, so a resumed run
    # replays the same ones.
    session_ids = models.JSONField(default=list)
    # The checks a team wrote once (`checks.parse_checks`), applied to every conversation.
    checks = models.JSONField(default=list, blank=True)
    # A tool call the recording never saw: "mark" it, or "run-sandbox": run the tool, its
    # database writes rolled back (`replay.UNSEEN_MODES`).
    unseen_tools = models.CharField(
        max_length=12,
        choices=[("mark", "mark"), ("run-sandbox", "run in a sandbox")],
        default="mark",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    # Counters kept on the row (the page never counts results): done, diverged, failed checks.
    done = models.PositiveIntegerField(default=0)
    diverged = models.PositiveIntegerField(default=0)
    failed_checks = models.PositiveIntegerField(default=0)
    # What the judge model's calls used (`judge`), at GLOVE_MODEL_PRICES (priced calls only).
    judge_tokens = models.BigIntegerField(default=0)
    judge_cost = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    task_id = models.CharField(max_length=64, blank=True, default="")
    trace_parent = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # Last progress: a run "running" whose progress stopped lost its worker, and is resumed.
    progressed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"replay {self.pk} on {self.version}"


class ReplayResult(models.Model):
    """One conversation replayed: the recorded and the replayed turns side by side, where
    they first differ, and the checks' findings."""

    run = models.ForeignKey(ReplayRun, on_delete=models.CASCADE, related_name="results")
    session = models.ForeignKey(
        "conversations.Session", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # Per customer message: {"customer", "recorded": {...}, "replayed": {...}, "same"}.
    turns = models.JSONField(default=list)
    diverged = models.BooleanField(default=False)
    # Where they first differ: "turn 2: reply", "turn 1: tool calls"; empty when identical.
    divergence = models.CharField(max_length=200, blank=True, default="")
    # Tool calls the recording never saw (answered with an error, marked in `turns`).
    unrecorded_calls = models.PositiveIntegerField(default=0)
    findings = models.JSONField(default=list, blank=True)
    checks_failed = models.PositiveIntegerField(default=0)
    recorded_tokens = models.BigIntegerField(default=0)
    replayed_tokens = models.BigIntegerField(default=0)
    # The judge model's calls on this conversation; its cost null: a model without a price.
    judge_tokens = models.BigIntegerField(default=0)
    judge_cost = models.DecimalField(max_digits=16, decimal_places=8, null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            # A resumed run (its worker died) redoes a conversation at most once.
            models.UniqueConstraint(fields=["run", "session"], name="one_result_per_session")
        ]
        indexes = [
            models.Index(
                fields=["run", "id"], condition=Q(diverged=True), name="replay_diverged_idx"
            )
        ]

    def __str__(self) -> str:
        return f"{self.session_id} in replay {self.run_id}"


class PublishRequest(models.Model):
    """A version waiting on a person's approval to be published (`promotion`): the approval
    is an `ApprovalRequest` on the agent's publications session; once it is decided, the
    sweep (or the agent's page) publishes the version or records the refusal, once."""

    class State(models.TextChoices):
        PENDING = "pending"
        PUBLISHED = "published"
        REJECTED = "rejected"
        # The published pointer moved while it waited: publishing it would undo that.
        STALE = "stale"

    version = models.ForeignKey(AgentVersion, on_delete=models.PROTECT, related_name="+")
    replay_run = models.ForeignKey(
        ReplayRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The published version when it was asked (its approval publishes over that only).
    published_when_asked = models.ForeignKey(
        AgentVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approval_id = models.UUIDField(unique=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(
                fields=["id"], condition=Q(state="pending"), name="publish_request_pending_idx"
            )
        ]

    def __str__(self) -> str:
        return f"publish {self.version} ({self.state})"
