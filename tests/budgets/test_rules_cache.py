"""A model call applies the budgets as they are when it is made, though on PostgreSQL this
process keeps them between calls: every change to the budgets table sets the rules'
generation, the reservation checks the one its rules were read at, and a call whose rules
are out of date is checked again with them read anew (having written nothing). A budget
staff add, change or delete mid-turn applies from the turn's very next call."""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from gloveapp.budgets.applying import GENERATION_SQL, generation_now, subject_for
from gloveapp.budgets.models import Budget, BudgetCounter, BudgetReservation
from gloveapp.budgets.services import BudgetExceeded, ModelUnpriced, budget_reserve
from gloveapp.conversations.services import session_create
from gloveapp.turns.models import Turn
from tests.budgets.conftest import budget, finished, make_budget, submit

pytestmark = [pytest.mark.django_db(transaction=True)]

A_CENT = {
    "key": "mid-turn",
    "name": "Added mid-turn",
    "scope": "everyone",
    "target": "",
    "window": "day",
    "cap_usd": "0.01",
    "cap_tokens": "",
    "cap_turns": "",
    "action": "refuse",
    "active": "on",
}


@pytest.fixture
def subject(customer, request):
    """A turn's subject this process has kept no budgets for yet (a session of its own)."""
    return subject_for(
        user_id=customer.pk, agent="spender", session_id=request.node.name[:60], turn_id=7
    )


def _reserve(subject, usd: str = "0.06", **extra):
    return budget_reserve(subject=subject, usd=Decimal(usd), tokens=10, model="m", **extra)


async def test_a_budget_staff_add_in_the_admin_mid_turn_stops_the_turns_very_next_call(
    customer, staff, turn_worker, spender
):
    # The turn's first call is checked (a roomy budget applies) and its budgets kept; its
    # tool has staff add a budget of a cent in the admin; the next call must meet it.
    await make_budget("roomy", cap_usd="100")
    session = await sync_to_async(session_create)(
        owner=customer, agent_name="spender-midway", title="Midway"
    )
    admin = Client()
    await sync_to_async(admin.force_login)(staff)
    answers = []
    spender.MIDWAY.append(lambda: answers.append(admin.post("/admin/budgets/budget/add/", A_CENT)))

    await submit(session_id=session.pk, text="midway", user_id=customer.pk)
    turn = await finished(session.pk)

    assert [answer.status_code for answer in answers] == [302]
    assert turn.status == Turn.Status.FAILED
    assert 'budget "mid-turn"' in turn.error
    assert spender.CALLS == ["midway"]  # the call after the tool was never made
    roomy = await BudgetReservation.objects.filter(budget_key="roomy").acount()
    assert roomy == 1  # the first call's only


def test_every_statement_that_changes_the_budgets_sets_a_new_generation(on_postgres):
    seen = [generation_now()]
    budget("a", cap_usd="1")  # an insert, as the admin's save is
    seen.append(generation_now())
    Budget.objects.filter(key="a").update(cap_usd=Decimal(2))  # a bulk update
    seen.append(generation_now())
    with connection.cursor() as cursor:
        cursor.execute("UPDATE budgets_budget SET active = false")  # raw SQL
        seen.append(generation_now())
        cursor.execute("DELETE FROM budgets_budget")
        seen.append(generation_now())
        cursor.execute("TRUNCATE budgets_budget")
        seen.append(generation_now())

    assert None not in seen
    assert len(set(seen)) == len(seen), seen


def test_a_change_rolled_back_leaves_the_generation_as_it_was(on_postgres):
    before = generation_now()
    with pytest.raises(RuntimeError), transaction.atomic():
        budget("a", cap_usd="1")
        assert generation_now() != before  # the transaction sees its own change
        raise RuntimeError("rolled back")

    assert generation_now() == before


def test_a_cap_raised_by_a_bulk_update_lets_the_very_next_call_go(on_postgres, subject):
    budget("tight", scope="user", target="cleo", cap_usd="0.10")
    _reserve(subject)
    with pytest.raises(BudgetExceeded):
        _reserve(subject)  # 0.12 of 0.10, by the budgets this process keeps

    Budget.objects.filter(key="tight").update(cap_usd=Decimal("1.00"))
    with CaptureQueriesContext(connection) as captured:
        held = _reserve(subject)

    assert len(held.ids) == 1
    # The reservation by the kept rules (it wrote nothing), the rules read anew, the
    # reservation again.
    assert len(captured.captured_queries) == 3, captured.captured_queries
    assert BudgetReservation.objects.filter(budget_key="tight").count() == 2
    assert BudgetCounter.objects.get(budget_key="tight").reserved_usd == Decimal("0.12")


def test_a_budget_deleted_by_raw_sql_no_longer_counts_the_next_call(on_postgres, subject):
    budget("gone", cap_usd="10")
    assert len(_reserve(subject).ids) == 1

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM budgets_budget WHERE key = 'gone'")
    held = _reserve(subject)

    assert held.ids == []
    assert BudgetReservation.objects.count() == 1
    assert BudgetCounter.objects.get(budget_key="gone").reserved_usd == Decimal("0.06")


def test_a_call_no_budget_applied_to_meets_one_added_since(on_postgres, subject):
    with CaptureQueriesContext(connection) as captured:
        assert _reserve(subject).ids == []  # the budgets read: none applies
        assert _reserve(subject).ids == []  # kept: only the generation is read
    read, probe = (query["sql"] for query in captured.captured_queries)
    assert "WHERE active AND (scope" in read  # the budgets that apply
    assert "scope" not in probe and GENERATION_SQL in probe

    budget("new", scope="session", target=subject.session_id, cap_usd="0.05")
    with pytest.raises(BudgetExceeded) as refused:
        _reserve(subject)

    assert refused.value.budget == "new"


def test_a_dollar_budget_deleted_since_no_longer_refuses_an_unpriced_model(on_postgres, subject):
    budget("dollars", cap_usd="10")
    with pytest.raises(ModelUnpriced):
        budget_reserve(subject=subject, usd=None, tokens=10, model="unpriced")

    Budget.objects.filter(key="dollars").delete()
    held = budget_reserve(subject=subject, usd=None, tokens=10, model="unpriced")

    assert held.ids == []


def test_a_budget_made_inactive_in_the_admin_stops_counting_at_the_next_call(
    on_postgres, subject, staff
):
    budget("paused", cap_usd="0.10")
    _reserve(subject)
    made = Budget.objects.get(key="paused")
    form = {**A_CENT, "key": "paused", "cap_usd": "0.10", "active": ""}
    admin = Client()
    admin.force_login(staff)

    answer = admin.post(f"/admin/budgets/budget/{made.pk}/change/", form)
    held = _reserve(subject)

    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert held.ids == []  # 0.12 of 0.10 would have been refused


def test_without_a_generation_every_call_reads_the_budgets(on_postgres, subject):
    budget("kept", cap_usd="10")
    _reserve(subject)  # the counter made, the budgets kept
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM budgets_rules_generation")
    _reserve(subject)  # the kept budgets found out of date
    with CaptureQueriesContext(connection) as captured:
        held = _reserve(subject)

    assert len(held.ids) == 1
    read, reserved = (query["sql"] for query in captured.captured_queries)
    assert "WHERE active AND (scope" in read and "WITH want AS" in reserved
    budget("later", cap_usd="10")  # a change writes the generation again
    assert generation_now() is not None


def test_after_a_change_the_other_subjects_read_the_budgets_without_a_wasted_reservation(
    on_postgres, customer, subject
):
    other = subject_for(user_id=customer.pk, agent="spender", session_id="another", turn_id=8)
    budget("shared", cap_usd="10")
    _reserve(subject)
    _reserve(other)

    Budget.objects.filter(key="shared").update(cap_usd=Decimal(20))
    with CaptureQueriesContext(connection) as first:
        _reserve(subject)
    with CaptureQueriesContext(connection) as second:
        _reserve(other)

    assert len(first.captured_queries) == 3  # the reservation that wrote nothing, the read, it
    assert len(second.captured_queries) == 2  # the read, the reservation
    assert BudgetReservation.objects.count() == 4
