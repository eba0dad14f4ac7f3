"""Budgets as part of an agent version: staff put a cap in a draft, publish it, and the
agent's next turns count under it; rolling back lifts it; a budget keeps its counters from
version to version (its key is `agent/id`); another agent's calls never count under it.
End to end on a turn worker in the test's event loop, as tests/budgets/test_at_the_limit.py.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from gloveapp.agents.config import get_agent_spec
from gloveapp.budgets.applying import subject_for
from gloveapp.budgets.models import BudgetCounter
from gloveapp.budgets.rules import version_rules
from gloveapp.budgets.services import budget_admit_turn
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from gloveapp.versions.services import version_draft, version_publish, version_rollback
from tests.budgets.conftest import finished, submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]
SPEND_CAP = {"id": "daily", "scope": "user", "window": "day", "cap_usd": "0.05"}


@sync_to_async
def publish(staff, budgets: list[dict]):
    version = version_draft(
        agent_name="spender",
        system_prompt=get_agent_spec("spender").system_prompt,
        budgets=budgets,
        author=staff,
    )
    version_publish(version=version, by=staff)
    return version


async def test_a_published_versions_budget_stops_the_agent_and_a_rollback_lifts_it(
    session_id, customer, staff, turn_worker, spender
):
    await publish(staff, [])
    await publish(staff, [SPEND_CAP])

    await submit(session_id=session_id, text="hello", user_id=customer.pk)
    stopped = await finished(session_id)
    await sync_to_async(version_rollback)(agent_name="spender", by=staff)
    await submit(session_id=session_id, text="hello again", user_id=customer.pk)
    answered = await finished(session_id)

    assert stopped.status == Turn.Status.FAILED
    assert 'budget "spender/daily"' in stopped.error
    assert answered.status == Turn.Status.DONE
    assert spender.CALLS == ["hello again"]  # the capped call was never made


async def test_a_budget_keeps_its_counters_when_a_new_version_raises_its_cap(
    session_id, customer, staff, turn_worker, spender
):
    one_turn = {"id": "turns", "scope": "user", "window": "day", "cap_turns": 1}
    await publish(staff, [one_turn])
    await submit(session_id=session_id, text="first", user_id=customer.pk)
    await finished(session_id)

    with pytest.raises(turns.TurnLimitReached) as refused:
        await submit(session_id=session_id, text="second", user_id=customer.pk)
    await publish(staff, [{**one_turn, "cap_turns": 2}])
    await submit(session_id=session_id, text="third", user_id=customer.pk)
    third = await finished(session_id)

    assert refused.value.budget == "spender/turns"
    assert third.status == Turn.Status.DONE and third.text == "third"
    counter = await BudgetCounter.objects.aget(budget_key="spender/turns")
    assert counter.turns == 2  # one count over both versions


def test_another_agents_turns_never_count_under_a_versions_budget(customer):
    rules = version_rules("spender", [{**SPEND_CAP, "cap_usd": None, "cap_turns": 1}])
    for _ in range(3):
        budget_admit_turn(
            subject=subject_for(
                user_id=customer.pk, agent="other", session_id="s1", version_rules=rules
            )
        )

    assert not BudgetCounter.objects.filter(budget_key="spender/daily").exists()


@pytest.mark.parametrize(
    ("budgets", "named"),
    [
        ({"id": "daily"}, "budgets must be a list"),
        ([None], "budgets[0]: a budget is an object"),
        ([{"id": "daily", "scope": "user", "window": "day"}], "budgets[0]: a budget needs"),
        ([{**SPEND_CAP, "id": "a b"}], "budgets[0]: id takes"),
        ([SPEND_CAP, SPEND_CAP], "budgets[1]: id daily is taken"),
        ([{**SPEND_CAP, "scope": "agent", "target": "coffee"}], "budgets[0]: a version's agent"),
        ([{**SPEND_CAP, "id": "x" * 95}], "budgets[0]: id is too long"),
        ([{**SPEND_CAP, "colour": "red"}], "budgets[0]: unknown field 'colour'"),
    ],
)
def test_a_draft_with_a_budget_it_could_not_apply_is_refused_naming_it(
    spender, staff, budgets, named
):
    with pytest.raises(ValueError, match=r"^" + named.replace("[", r"\[").replace("]", r"\]")):
        version_draft(agent_name="spender", system_prompt="x", budgets=budgets, author=staff)


def test_staff_see_a_published_versions_budget_on_the_usage_page_and_in_metrics(
    spender, staff, customer, settings
):
    from decimal import Decimal

    from django.test import Client

    from gloveapp.budgets.services import budget_reserve, budget_settle
    from gloveapp.versions.selectors import published_budget_rules

    settings.GLOVE_METRICS_TOKEN = "metrics-token-123"
    version = version_draft(
        agent_name="spender", system_prompt="x", budgets=[{**SPEND_CAP, "cap_usd": "2"}]
    )
    version_publish(version=version, by=staff)
    subject = subject_for(
        user_id=customer.pk,
        agent="spender",
        session_id="s1",
        version_rules=published_budget_rules(),
    )
    held = budget_reserve(subject=subject, usd=Decimal("0.30"), tokens=100, model="m")
    budget_settle(held=held, usd=Decimal("0.5"), tokens=80)
    client = Client()
    client.force_login(staff)

    page = client.get("/admin/usage/").content.decode()
    scraped = client.get("/metrics", headers={"Authorization": "Bearer metrics-token-123"})

    assert 'data-budget="spender/daily"' in page and "$0.500000" in page
    assert 'glove_budget_spend_usd{budget="spender/daily"} 0.5' in scraped.content.decode()
