"""Budgets hold under concurrency on PostgreSQL: reservations and turn counts are decided on
locked counter rows, never on a count read before the write (threads, each on its own
connection, released together: `tests.helpers.run_in_threads`)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from gloveapp.budgets.applying import subject_for
from gloveapp.budgets.models import BudgetCounter
from gloveapp.budgets.services import (
    BudgetExceeded,
    budget_release,
    budget_reserve,
    budget_settle,
    ledger_balance,
)
from gloveapp.conversations.services import session_create
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from tests.budgets.conftest import budget
from tests.helpers import run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_concurrent_posts_across_sessions_of_one_user_never_pass_the_turns_per_minute(
    on_postgres, settings, customer, spender
):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 7
    sessions = [
        session_create(owner=customer, agent_name="spender", title=f"chat {n}").pk
        for n in range(30)
    ]
    minute = timezone.now().replace(second=0, microsecond=0)

    def post(index: int) -> str:
        try:
            turns.start_turn_sync(
                session_id=sessions[index], text="hello", user_id=customer.pk, source="api"
            )
        except turns.TurnLimitReached as refused:
            assert refused.budget == "turns-per-minute"
            return "refused"
        return "queued"

    outcomes = run_in_threads(len(sessions), post)

    stored = Turn.objects.filter(user=customer, created_at__gte=minute).count()
    # A minute boundary inside the run gives a second window: at most twice the cap then.
    windows = BudgetCounter.objects.filter(budget_key="turns-per-minute").count()
    assert outcomes.count("queued") == stored == 7 * windows
    assert all(counter.turns == 7 for counter in BudgetCounter.objects.all())


def test_a_hundred_concurrent_reservations_never_pass_the_cap(on_postgres, customer):
    budget("team-day", cap_usd="1.00")
    subject = subject_for(user_id=customer.pk, agent="spender", session_id="s")
    worst = Decimal("0.063")

    def reserve(index: int):
        try:
            held = budget_reserve(subject=subject, usd=worst, tokens=1000, model="m")
        except BudgetExceeded:
            return None
        # Half of them answer (settled at a part of the worst case), half fail (released).
        if index % 2:
            budget_settle(held=held, usd=Decimal("0.02"), tokens=400)
        else:
            budget_release(held=held)
        return held

    results = run_in_threads(100, reserve)

    counter = BudgetCounter.objects.get(budget_key="team-day")
    balance = ledger_balance()
    assert counter.reserved_usd == 0
    assert counter.spent_usd <= Decimal("1.00")
    assert balance["open"] == 0 and balance["rows"] == sum(1 for r in results if r)
    assert balance["reserved"] == balance["settled"] + balance["released"]


def test_reservations_in_flight_at_once_never_add_up_past_the_cap(on_postgres, customer):
    budget("team-day", cap_usd="1.00")
    subject = subject_for(user_id=customer.pk, agent="spender", session_id="s")

    def reserve(index: int):
        try:
            return budget_reserve(subject=subject, usd=Decimal("0.063"), tokens=1000, model="m")
        except BudgetExceeded:
            return None

    held = [h for h in run_in_threads(100, reserve) if h is not None]

    counter = BudgetCounter.objects.get(budget_key="team-day")
    assert len(held) == 15  # 15 x 0.063 = 0.945; a 16th would be 1.008
    assert counter.reserved_usd == Decimal("0.063") * 15
