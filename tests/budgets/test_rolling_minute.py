"""A minute's cap on turns holds over any 60 seconds, not per calendar minute: a user who
starts the cap's turns at 12:00:59 cannot start the cap again at 12:01:00 (a calendar
minute would let twice the cap through across its edge)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gloveapp.budgets.applying import subject_for
from gloveapp.budgets.models import BudgetCounter
from gloveapp.budgets.services import BudgetExceeded, budget_admit_turn
from tests.budgets.conftest import budget

# Both passes: the counters are read through raw SQL on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

EDGE = datetime(2030, 1, 1, 12, 0, 59, tzinfo=UTC)


def admitted(subject, at: datetime) -> int | None:
    """None when the turn is admitted, else the seconds the refusal says to wait."""
    try:
        budget_admit_turn(subject=subject, now=at)
    except BudgetExceeded as refused:
        assert refused.budget == "turns-per-minute"
        assert "in the last minute" in str(refused)
        return refused.retry_after
    return None


@pytest.fixture
def cleo(customer):
    return subject_for(user_id=customer.pk, agent="spender", session_id="glove_s1")


def test_the_cap_holds_across_a_minutes_edge_and_opens_as_the_oldest_turn_leaves(settings, cleo):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 3
    for n in range(3):
        assert admitted(cleo, EDGE - timedelta(seconds=2 - n)) is None  # :57, :58, :59

    # One second past the calendar edge: still three in the last minute.
    assert admitted(cleo, EDGE + timedelta(seconds=1)) == 57  # :57's turn leaves at 12:01:57
    assert admitted(cleo, EDGE + timedelta(seconds=57)) == 1

    # 12:01:57: the 12:00:57 turn has left, so exactly one more fits.
    assert admitted(cleo, EDGE + timedelta(seconds=58)) is None
    assert admitted(cleo, EDGE + timedelta(seconds=58, milliseconds=500)) == 1

    counter = BudgetCounter.objects.get(budget_key="turns-per-minute")
    assert counter.turns == 3 and len(counter.started) == 3  # never more than the cap kept


def test_each_user_has_a_rolling_minute_of_their_own(settings, cleo, django_user_model):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 1
    other = django_user_model.objects.create_user("otto", password="pw-otto-1")
    otto = subject_for(user_id=other.pk, agent="spender", session_id="glove_s2")

    assert admitted(cleo, EDGE) is None
    assert admitted(otto, EDGE) is None
    assert admitted(cleo, EDGE + timedelta(seconds=30)) == 30
    assert admitted(cleo, EDGE + timedelta(seconds=61)) is None


def test_a_declared_minute_budget_on_turns_rolls_and_a_days_stays_calendar(settings, cleo):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 0
    budget("team-burst", scope="user", window="minute", cap_turns=2)
    budget("team-day", scope="user", window="day", cap_turns=3)

    def outcome(at: datetime) -> str | None:
        try:
            budget_admit_turn(subject=cleo, now=at)
        except BudgetExceeded as refused:
            return refused.budget
        return None

    assert [outcome(EDGE), outcome(EDGE + timedelta(seconds=0.5))] == [None, None]
    assert outcome(EDGE + timedelta(seconds=2)) == "team-burst"  # 12:01:01, calendar would pass
    assert outcome(EDGE + timedelta(seconds=61)) is None
    # The day's cap is a calendar day: its 3 are used; the next day opens it at 0.
    assert outcome(EDGE + timedelta(seconds=200)) == "team-day"
    assert outcome(EDGE + timedelta(days=1)) is None
