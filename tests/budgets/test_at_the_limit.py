"""What a budget does at its cap, end to end on a turn worker in the test's event loop:
refuse (the customer reads why; REST answers 429 naming it), warn (a metric and an inbox item
for staff, the turn goes on), require a person (the turn waits on an approval "raise the
limit" decided in /approvals/: approved it goes on, rejected it stops). A model with no price
fails closed; subagents count against the same budgets.

The agent's calls cost about $0.063 at worst and $0.026 in fact (tests/budgets/agent.py).
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.budgets.models import BudgetCounter, BudgetReservation
from gloveapp.budgets.services import ledger_balance
from gloveapp.conversations.models import Session
from gloveapp.observe import metrics
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from inbox.models import InboxItem
from tests.budgets.conftest import finished, make_budget, parked, submit

pytestmark = [pytest.mark.django_db(transaction=True)]


def _limit_count(budget: str, action: str) -> float:
    return metrics.child("glove_budget_limit_reached", budget, action)._value.get()


async def _page(client_user, session_id: str) -> str:
    client = AsyncClient()
    await client.aforce_login(client_user)
    return (await client.get(f"/sessions/{session_id}/")).content.decode()


async def test_a_call_past_a_refusing_cap_is_not_made_and_the_customer_reads_why(
    session_id, customer, turn_worker, spender
):
    await make_budget("daily-cap", cap_usd="0.05", name="Daily spend")

    await submit(session_id=session_id, text="hello", user_id=customer.pk)
    turn = await finished(session_id)

    assert turn.status == Turn.Status.FAILED
    assert 'budget "daily-cap"' in turn.error
    assert spender.CALLS == []  # the model was never called
    assert "budget &quot;daily-cap&quot;" in await _page(customer, session_id)
    balance = await sync_to_async(ledger_balance)()
    assert balance["rows"] == 0  # nothing was reserved


async def test_calls_go_on_until_the_next_worst_case_would_pass_the_cap(
    session_id, customer, turn_worker, spender
):
    await make_budget("daily-cap", cap_usd="0.15")

    statuses = []
    for n in range(12):
        try:
            await submit(session_id=session_id, text=f"hello {n}", user_id=customer.pk)
        except turns.TurnLimitReached:
            statuses.append("refused at its start")
            break
        statuses.append((await finished(session_id)).status)

    counter = await BudgetCounter.objects.aget(budget_key="daily-cap")
    # Done while the next worst case fits; the call that would not fit fails its turn, and
    # the next turn is refused before it is queued.
    assert statuses[:2] == [Turn.Status.DONE, Turn.Status.DONE]
    assert statuses[-2:] == [Turn.Status.FAILED, "refused at its start"]
    assert counter.spent_usd <= Decimal("0.15") and counter.reserved_usd == 0
    balance = await sync_to_async(ledger_balance)()
    assert balance["open"] == 0
    assert balance["reserved"] == balance["settled"] + balance["released"]


async def test_rest_clients_get_a_429_naming_the_budget_once_it_refused_a_call(
    session_id, customer, turn_worker, spender
):
    from rest_framework.authtoken.models import Token

    await make_budget("daily-cap", cap_usd="0.05")
    token = await Token.objects.acreate(user=customer)
    headers = {"Authorization": f"Token {token.key}"}
    client = AsyncClient()
    session = await Session.objects.aget(pk=session_id)
    url = f"/api/sessions/{session.key}/agent/turns"

    json = "application/json"
    first = await client.post(url, {"text": "hello"}, content_type=json, headers=headers)
    await finished(session_id)
    second = await client.post(url, {"text": "again"}, content_type=json, headers=headers)

    assert first.status_code == 202  # its call is refused on the worker
    assert second.status_code == 429
    assert second.json()["budget"] == "daily-cap"
    assert 'budget "daily-cap"' in second.json()["error"]
    assert 0 < int(second["Retry-After"]) <= 86_400


async def test_a_warn_budget_tells_staff_once_and_the_turns_go_on(
    session_id, customer, turn_worker, spender
):
    await make_budget("watch", cap_usd="0.01", action="warn")
    before = _limit_count("watch", "warn")

    for n in range(2):
        await submit(session_id=session_id, text=f"hello {n}", user_id=customer.pk)
        assert (await finished(session_id)).status == Turn.Status.DONE

    items = [item async for item in InboxItem.objects.filter(session_id=session_id)]
    assert [item.tag for item in items] == ["budget:warning:watch"]
    assert items[0].status == "pending" and not items[0].blocking
    assert _limit_count("watch", "warn") == before + 1
    counter = await BudgetCounter.objects.aget(budget_key="watch")
    assert counter.spent_usd > Decimal("0.01")


async def test_a_budget_that_needs_a_person_waits_and_an_approval_lets_the_turn_go_on(
    session_id, customer, staff, turn_worker, spender
):
    await make_budget("ask-first", cap_usd="0.01", action="require_person")

    await submit(session_id=session_id, text="hello", user_id=customer.pk)
    await parked(session_id)
    request = await ApprovalRequest.objects.aget(session_id=session_id)
    client = Client()
    await sync_to_async(client.force_login)(staff)
    page = await sync_to_async(client.get)(f"/approvals/{request.pk}")
    decided = await sync_to_async(client.post)(
        f"/approvals/{request.pk}/decide",
        {"decision": "approve", "fingerprint": request.fingerprint},
    )
    turn = await finished(session_id)

    assert request.tool_name == "raise_budget_limit"
    assert request.args["budget"] == "ask-first" and request.args["user"] == "cleo"
    assert page.status_code == 200 and "ask-first" in page.content.decode()
    assert decided.status_code == 302  # back to the queue, decided
    assert turn.status == Turn.Status.DONE
    assert spender.CALLS == ["hello"]
    counter = await BudgetCounter.objects.aget(budget_key="ask-first")
    assert counter.spent_usd > Decimal("0.01")  # raised for this turn, counted all the same


async def test_a_rejected_raise_stops_the_turn_with_a_message(
    session_id, customer, staff, turn_worker, spender
):
    await make_budget("ask-first", cap_usd="0.01", action="require_person")

    await submit(session_id=session_id, text="hello", user_id=customer.pk)
    await parked(session_id)
    request = await ApprovalRequest.objects.aget(session_id=session_id)
    client = Client()
    await sync_to_async(client.force_login)(staff)
    await sync_to_async(client.post)(
        f"/approvals/{request.pk}/decide",
        {"decision": "reject", "fingerprint": request.fingerprint, "reason": "Enough today"},
    )
    turn = await finished(session_id)

    assert turn.status == Turn.Status.FAILED
    assert "declined to raise it: Enough today" in turn.error
    assert spender.CALLS == []
    assert "declined to raise it" in await _page(customer, session_id)


async def test_a_model_without_a_price_fails_closed_and_a_free_one_goes(
    session_id, customer, turn_worker, spender, settings
):
    await make_budget("daily-cap", cap_usd="5")
    settings.GLOVE_MODEL_PRICES = {}

    await submit(session_id=session_id, text="hello", user_id=customer.pk)
    unpriced = await finished(session_id)
    settings.GLOVE_MODEL_PRICES = {spender.MODEL: {"input": 0, "output": 0}}
    await submit(session_id=session_id, text="free", user_id=customer.pk)
    free = await finished(session_id)

    assert unpriced.status == Turn.Status.FAILED and "has no price" in unpriced.error
    assert free.status == Turn.Status.DONE


async def test_subagents_and_every_call_of_a_loop_count_against_the_same_budget(
    session_id, customer, turn_worker, spender
):
    await make_budget("per-turn", cap_usd="1.00", window="turn")

    await submit(session_id=session_id, text="ask the helper", user_id=customer.pk)
    asked = await finished(session_id)
    await submit(session_id=session_id, text="loop forever", user_id=customer.pk)
    looped = await finished(session_id)

    asked_calls = await BudgetReservation.objects.filter(turn_id=asked.pk).acount()
    loop_rows = [
        row async for row in BudgetReservation.objects.filter(turn_id=looped.pk).order_by("id")
    ]
    assert asked.status == Turn.Status.DONE
    assert asked_calls == 3  # the parent's call, the helper's, the parent's answer
    assert looped.status == Turn.Status.FAILED and 'budget "per-turn"' in looped.error
    settled = sum(row.settled_usd for row in loop_rows)
    assert 1 < len(loop_rows) < spender.LOOPS
    assert settled <= Decimal("1.00")  # the runaway loop stopped at the turn's cap


async def test_the_turns_per_minute_budget_refuses_the_next_post_on_the_page(
    session_id, customer, settings, turn_worker, spender
):
    settings.GLOVE_TURNS_PER_USER_PER_MINUTE = 2
    client = AsyncClient()
    await client.aforce_login(customer)
    url = f"/sessions/{session_id}/messages"

    statuses = [(await client.post(url, {"text": f"hi {n}"})).status_code for n in range(3)]

    assert statuses == [303, 303, 429]
    await turns.wait_until_idle(session_id)
