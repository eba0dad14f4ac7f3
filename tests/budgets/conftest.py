from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from gloveapp.budgets.models import Budget
from gloveapp.conversations.services import session_create
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from tests.budgets import agent


@pytest.fixture
def spender(settings):
    """The agent whose model reports real token counts, priced (tests/budgets/agent.py)."""
    agent.register()
    agent.CALLS.clear()
    agent.MIDWAY.clear()
    settings.GLOVE_AGENTS = {**settings.GLOVE_AGENTS, **agent.AGENTS}
    settings.GLOVE_MODEL_PRICES = {**settings.GLOVE_MODEL_PRICES, **agent.PRICES}
    settings.GLOVE_TURN_PARK_AFTER_SECONDS = 0
    return agent


@pytest.fixture
def customer(transactional_db):
    return get_user_model().objects.create_user("cleo", password="pw-cleo-1")


@pytest.fixture
def staff(transactional_db):
    return get_user_model().objects.create_user(
        "stan", password="pw-stan-1", is_staff=True, is_superuser=True
    )


@pytest.fixture
def session_id(customer, spender) -> str:
    return session_create(owner=customer, agent_name="spender", title="Spending").pk


def budget(key: str, **fields) -> Budget:
    """A budget as staff declare it in the admin (the admin form's tests are apart)."""
    values = {"scope": "everyone", "window": "day", "action": "refuse", **fields}
    if "cap_usd" in values and values["cap_usd"] is not None:
        values["cap_usd"] = Decimal(str(values["cap_usd"]))
    return Budget.objects.create(key=key, **values)


async def finished(session_id: str) -> Turn:
    """The session's newest turn once it ended (done, failed or stopped)."""
    for _ in range(3000):
        turn = await Turn.objects.filter(session_id=session_id).alast()
        if turn is not None and turn.status in ("done", "failed", "cancelled"):
            return turn
        await asyncio.sleep(0.01)
    raise AssertionError(f"the turn never ended: {turn.status if turn else None}")


async def parked(session_id: str) -> Turn:
    for _ in range(3000):
        turn = await Turn.objects.filter(session_id=session_id, status="waiting").afirst()
        if turn is not None:
            return turn
        await asyncio.sleep(0.01)
    states = [t async for t in Turn.objects.filter(session_id=session_id).values("status")]
    raise AssertionError(f"the turn never parked: {states}")


submit = turns.submit_message
make_budget = sync_to_async(budget)


@pytest.fixture
def on_postgres(transactional_db):
    """Concurrency and statement tests that mean something on PostgreSQL only."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
