"""On PostgreSQL a model call's check is two statements (the reservation, which also checks
that the budgets this process cached are current, and the settlement), each its own
transaction whose commit does not wait for the disk, and none of them changes how the
caller's own transaction commits; the one-statement reservation decides as the rules do
(the tightest blocking budget refuses, nothing is reserved then; warn and raised budgets
count and never stop it)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from gloveapp.budgets.applying import subject_for
from gloveapp.budgets.models import BudgetCounter, BudgetReservation
from gloveapp.budgets.services import (
    BudgetExceeded,
    budget_reserve,
    budget_settle,
    ledger_balance,
)
from tests.budgets.conftest import budget

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _subject(customer):
    return subject_for(user_id=customer.pk, agent="spender", session_id="s-1", turn_id=7)


def _commit_mode() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_a_call_is_two_statements_with_no_transaction_around_them(on_postgres, customer):
    budget("everyone-day", cap_usd="10")
    budget("mine", scope="user", target="cleo", cap_usd="5", action="warn")
    subject = _subject(customer)
    # A first call makes the counters (once, outside the check) and keeps the budgets.
    budget_settle(
        held=budget_reserve(subject=subject, usd=Decimal("0.01"), tokens=10, model="m"),
        usd=Decimal("0.01"),
        tokens=10,
    )

    with CaptureQueriesContext(connection) as captured:
        held = budget_reserve(subject=subject, usd=Decimal("0.05"), tokens=500, model="m")
        assert budget_settle(held=held, usd=Decimal("0.02"), tokens=200)

    sent = [query["sql"] for query in captured.captured_queries]
    assert len(sent) == 2, sent
    assert not any(text.strip().upper() in ("BEGIN", "COMMIT") for text in sent)
    assert _commit_mode() == "on"  # set for each statement's own transaction only
    assert len(held.ids) == 2
    rows = BudgetReservation.objects.filter(pk__in=held.ids)
    assert {row.state for row in rows} == {"settled"}
    assert {row.settled_usd for row in rows} == {Decimal("0.02")}
    balance = ledger_balance()
    assert balance["open"] == 0
    assert balance["reserved"] == balance["settled"] + balance["released"]
    counters = BudgetCounter.objects.filter(budget_key__in=["everyone-day", "mine"])
    assert {c.spent_usd for c in counters} == {Decimal("0.03")}
    assert {c.reserved_usd for c in counters} == {Decimal(0)}


def test_inside_a_callers_transaction_its_commit_mode_is_left_alone(on_postgres, customer):
    budget("everyone-day", cap_usd="10")
    subject = _subject(customer)
    with transaction.atomic():
        held = budget_reserve(subject=subject, usd=Decimal("0.05"), tokens=500, model="m")
        budget_settle(held=held, usd=Decimal("0.02"), tokens=200)
        assert _commit_mode() == "on"
    assert BudgetReservation.objects.get(pk=held.ids[0]).state == "settled"


def test_the_tightest_blocking_budget_refuses_and_nothing_is_reserved(on_postgres, customer):
    budget("roomy", cap_usd="10")
    budget("tight", scope="user", target="cleo", cap_usd="0.10")
    budget("loud", scope="agent", target="spender", cap_usd="0.01", action="warn")
    subject = _subject(customer)
    first = budget_reserve(subject=subject, usd=Decimal("0.06"), tokens=10, model="m")
    assert [rule.key for rule, _ in first.warned] == ["loud"]

    with pytest.raises(BudgetExceeded) as refused:
        budget_reserve(subject=subject, usd=Decimal("0.06"), tokens=10, model="m")

    assert refused.value.budget == "tight"
    assert BudgetReservation.objects.count() == 3  # the first call's rows only
    tight = BudgetCounter.objects.get(budget_key="tight")
    assert tight.reserved_usd == Decimal("0.06")
    assert tight.refused_usd == Decimal("0.06")  # the next turns are refused at their start
    # Raised by a person for this turn: it counts and no longer stops the call.
    raised = budget_reserve(
        subject=subject, usd=Decimal("0.06"), tokens=10, model="m", allow=frozenset({"tight"})
    )
    assert len(raised.ids) == 3
    assert BudgetCounter.objects.get(budget_key="tight").reserved_usd == Decimal("0.12")


def test_a_call_that_fits_exactly_at_the_cap_goes(on_postgres, customer):
    budget("tokens", scope="user", target="cleo", cap_tokens=1000)
    subject = _subject(customer)
    budget_reserve(subject=subject, usd=Decimal(0), tokens=600, model="m")
    budget_reserve(subject=subject, usd=Decimal(0), tokens=400, model="m")  # 1,000 of 1,000
    with pytest.raises(BudgetExceeded):
        budget_reserve(subject=subject, usd=Decimal(0), tokens=1, model="m")


# A value of each parameter type the settlement takes, to EXPLAIN it as prepared.
_SAMPLE = {
    "boolean": "true",
    "json": "'[1, 2]'",
    "integer[]": "'{1, 2}'",
    "bigint[]": "'{1, 2}'",
    "numeric": "0",
    "bigint": "0",
    "integer": "0",
    "smallint": "0",
    "text": "'settled'",
    "character varying": "'settled'",
    "timestamp with time zone": "now()",
}


def _planned(statement_like: str) -> tuple[int, int, str]:
    """The generic and custom plans a prepared statement of this connection had, and its
    plan now (EXPLAIN EXECUTE with a value of each parameter's type)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans, custom_plans, parameter_types::text[]"
            " FROM pg_prepared_statements WHERE statement LIKE %s",
            [statement_like],
        )
        name, generic, custom, types = cursor.fetchone()
        cursor.execute(f"EXPLAIN EXECUTE {name}({', '.join(_SAMPLE[kind] for kind in types)})")
        return generic, custom, "\n".join(row[0] for row in cursor.fetchall())


def test_a_call_is_planned_once_and_finds_its_rows_by_index(on_postgres, customer):
    # Counters and settled ledger rows, analysed, as a database that ran for a while has:
    # a scan of every counter, or the partial index of open reservations (whatever dead
    # entries it holds), must not look like the cheaper way in to the planner.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO budgets_budgetcounter (budget_key, window_key, ends_at, spent_usd,"
            " reserved_usd, spent_tokens, reserved_tokens, turns, started)"
            " SELECT 'old', 'w' || n, now(), 0, 0, 0, 0, 0, '[]'"
            " FROM generate_series(1, 10000) AS n"
        )
        cursor.execute(
            "INSERT INTO budgets_budgetreservation (counter_id, budget_key, window_key,"
            " turn_id, attempt, model, state, reserved_usd, settled_usd, reserved_tokens,"
            " settled_tokens, created_at, settled_at)"
            " SELECT 1, 'old', 'w', n, 0, 'm', 'settled', 1, 1, 1, 1, now(), now()"
            " FROM generate_series(1, 50000) AS n"
        )
        cursor.execute("ANALYZE budgets_budgetcounter, budgets_budgetreservation")
    budget("everyone-day", cap_usd="10")
    subject = _subject(customer)
    for _ in range(8):  # past the five custom plans PostgreSQL tries first
        held = budget_reserve(subject=subject, usd=Decimal("0.01"), tokens=10, model="m")
        assert budget_settle(held=held, usd=Decimal("0.01"), tokens=10)

    generic, custom, reserving = _planned("%WITH want AS%")
    assert generic >= 2 and custom <= 5, (generic, custom)
    assert "budget_counter_unique_window" in reserving, reserving
    assert "Seq Scan on budgets_budgetcounter" not in reserving, reserving
    generic, custom, settling = _planned("%SET state =%")
    assert generic >= 2 and custom <= 5, (generic, custom)
    assert "budgets_budgetreservation_pkey" in settling, settling
    assert "budget_open_idx" not in settling, settling
