"""Budgets, the counters of their windows and the ledger of reservations, as shared rows.

A `Budget` is declared by staff in the admin (`GLOVE_BUDGETS` declares defaults in the
settings, `rules.settings_rules`; those have no row). Every budget is known by its `key`,
which names its counters, its ledger rows and its metrics.

A `BudgetCounter` is one budget's use in one window for one subject (a user's day, a
session's month, a turn): what is settled and what is reserved by calls in flight. Each
reservation is a conditional change of these rows under their row locks, so concurrent
calls cannot together pass the cap (`services.budget_reserve`).

A `BudgetReservation` is the ledger: one row per model call and budget, reserved at the
call's worst case, then settled at its actual cost or released. Reserved = settled +
released over the ledger, and nothing stays `reserved` once the turn is over.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

# Dollars: the cost catalogue's Decimals. 12 places hold a token of the cheapest model
# exactly (a price of 0.01 per million tokens is 1e-8 a token).
MONEY = {"max_digits": 24, "decimal_places": 12}


class Budget(models.Model):
    class Scope(models.TextChoices):
        USER = "user", "a user (or each user)"
        GROUP = "group", "a group (or each group)"
        AGENT = "agent", "an agent (or each agent)"
        SESSION = "session", "a session (or each session)"
        EVERYONE = "everyone", "everyone together"

    class Window(models.TextChoices):
        MINUTE = "minute", "a minute"
        TURN = "turn", "a turn"
        DAY = "day", "a day (UTC)"
        MONTH = "month", "a month (UTC)"

    class Action(models.TextChoices):
        WARN = "warn", "warn staff, let it go on"
        REQUIRE_PERSON = "require_person", "wait for a person to raise the limit"
        REFUSE = "refuse", "refuse"

    key = models.SlugField(
        max_length=100,
        unique=True,
        help_text="The budget's id: its counters, its ledger rows and its metrics' label.",
    )
    name = models.CharField(max_length=200, blank=True, default="")
    scope = models.CharField(max_length=10, choices=Scope.choices)
    target = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="A username, group name, agent name or session id; empty: each one apart "
        "(every user has a budget of their own). Empty for everyone.",
    )
    window = models.CharField(max_length=10, choices=Window.choices)
    cap_usd = models.DecimalField(
        **MONEY, null=True, blank=True, help_text="US dollars, as GLOVE_MODEL_PRICES counts."
    )
    cap_tokens = models.BigIntegerField(null=True, blank=True)
    cap_turns = models.IntegerField(null=True, blank=True)
    action = models.CharField(max_length=16, choices=Action.choices, default=Action.REFUSE)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        indexes = [
            # Which budgets apply to a call: a few probes of (scope, target), active ones only.
            models.Index(
                fields=["scope", "target"], condition=Q(active=True), name="budget_applies_idx"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(cap_usd__isnull=False)
                | Q(cap_tokens__isnull=False)
                | Q(cap_turns__isnull=False),
                name="budget_has_a_cap",
            ),
            models.CheckConstraint(
                condition=~Q(scope="everyone") | Q(target=""), name="budget_everyone_no_target"
            ),
            models.CheckConstraint(
                condition=(Q(cap_usd__isnull=True) | Q(cap_usd__gte=0))
                & (Q(cap_tokens__isnull=True) | Q(cap_tokens__gte=0))
                & (Q(cap_turns__isnull=True) | Q(cap_turns__gte=0)),
                name="budget_caps_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class BudgetCounter(models.Model):
    """One budget's use in one window for one subject (`window_key`: subject|window)."""

    budget_key = models.CharField(max_length=100)
    window_key = models.CharField(max_length=255)
    # When the window ends (the turn's windows: when the counter was made; retention).
    ends_at = models.DateTimeField()
    spent_usd = models.DecimalField(**MONEY, default=0)
    reserved_usd = models.DecimalField(**MONEY, default=0)
    spent_tokens = models.BigIntegerField(default=0)
    reserved_tokens = models.BigIntegerField(default=0)
    turns = models.IntegerField(default=0)
    # A warn budget's window warned staff once (set by one conditional update).
    warned_at = models.DateTimeField(null=True, blank=True)
    # The worst case of the last call this window refused: while it still does not fit
    # (the cap unchanged), new turns are refused at their start (a 429), not queued to fail.
    refused_usd = models.DecimalField(**MONEY, null=True, blank=True)
    refused_tokens = models.BigIntegerField(null=True, blank=True)
    # A minute's cap on turns holds over any 60 s, not per calendar minute (which lets twice
    # the cap through across a minute's edge): the start times (epoch seconds) of the turns
    # its rolling counter admitted in the last minute, at most the cap of them.
    started = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["budget_key", "window_key"], name="budget_counter_unique_window"
            )
        ]
        indexes = [models.Index(fields=["ends_at"], name="budget_counter_ends_idx")]

    def __str__(self) -> str:
        return f"{self.budget_key} {self.window_key}"


class BudgetReservation(models.Model):
    class State(models.TextChoices):
        RESERVED = "reserved"
        SETTLED = "settled"
        RELEASED = "released"

    # The counter it moved (no foreign key: counters and ledger rows are pruned apart).
    counter_id = models.BigIntegerField()
    budget_key = models.CharField(max_length=100)
    window_key = models.CharField(max_length=255)
    # The turn and attempt whose model call this is (no foreign key: the turns sit above).
    turn_id = models.BigIntegerField(null=True, blank=True)
    attempt = models.PositiveSmallIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True, default="")
    state = models.CharField(max_length=10, choices=State.choices, default=State.RESERVED)
    reserved_usd = models.DecimalField(**MONEY, default=0)
    settled_usd = models.DecimalField(**MONEY, default=0)
    reserved_tokens = models.BigIntegerField(default=0)
    settled_tokens = models.BigIntegerField(default=0)
    created_at = models.DateTimeField()
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # What a take-back settles (a turn's reservations still open), the admin's filter.
            models.Index(fields=["turn_id"], name="budget_ledger_turn_idx"),
            # The sweep of open reservations left by turns that ended, and retention.
            models.Index(
                fields=["created_at"], condition=Q(state="reserved"), name="budget_open_idx"
            ),
            models.Index(fields=["created_at", "id"], name="budget_ledger_created_idx"),
            # The admin's ledger of one budget, newest first; and its released rows (few,
            # and only those enter this index: a reservation's insert does not).
            models.Index(
                fields=["budget_key", "created_at", "id"], name="budget_ledger_budget_idx"
            ),
            models.Index(
                fields=["created_at", "id"],
                condition=Q(state="released"),
                name="budget_ledger_released_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.budget_key} {self.state} {self.reserved_usd}"
