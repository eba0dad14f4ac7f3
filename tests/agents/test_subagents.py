"""A lead agent delegating to a subagent configured in GLOVE_AGENTS, on the turn worker: the
child's conversation is a session of its own linked to the parent's, shown nested on the
page and in the admin; depth and cost are bounded by settings."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.services import session_create
from gloveapp.turns import public as turns
from tests.agents.conftest import last_reply, next_slot
from tests.agents.subagent_agents import ASK_PROMPT, agents, register_models

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("worker"),
    pytest.mark.timeout(120),
]


@pytest.fixture
def lead(settings, transactional_db):
    register_models()
    settings.GLOVE_AGENTS = {**settings.GLOVE_AGENTS, **agents()}
    owner = get_user_model().objects.create_user("lead-owner", password="pw-lead-owner-1")
    return owner, session_create(owner=owner, agent_name="lead", title="Roasting").pk


async def delegate(session_id: str, answer: str = "dark") -> None:
    await turns.submit_message(session_id=session_id, text="Please roast the Kenya AA")
    slot = await next_slot(session_id)
    assert slot.input == {"question": ASK_PROMPT}
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value=answer)
    await turns.wait_until_idle(session_id)


def _children(session_id: str) -> list[Session]:
    return list(Session.objects.filter(parent_id=session_id))


def _texts(session_id: str) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(session_id=session_id)
        .exclude(text="tool results")
        .order_by("seq")
        .values_list("sender", "text")
    )


def _subagent_results(session_id: str) -> list[dict]:
    rows = Message.objects.filter(session_id=session_id, tool_results__isnull=False)
    return [
        r["result"]
        for row in rows
        for r in row.tool_results
        if r["tool_name"] == "glove_invoke_subagent"
    ]


async def test_it_returns_the_childs_answer_to_the_parent(lead):
    _, session_id = lead

    await delegate(session_id)

    assert await last_reply(session_id) == "The roaster says: Roasted (roast: dark)."
    [result] = await sync_to_async(_subagent_results)(session_id)
    assert result == {
        "status": "success",
        "data": {"subagent": "roaster", "content": "Roasted (roast: dark)."},
    }


async def test_it_stores_the_childs_conversation_as_a_linked_session(lead):
    owner, session_id = lead

    await delegate(session_id)

    [child] = await sync_to_async(_children)(session_id)
    assert (child.agent_name, child.owner_id) == ("roaster", owner.pk)
    assert child.parent_call_id.startswith("call_lead_")
    texts = await sync_to_async(_texts)(child.pk)
    assert texts[0] == ("user", "Roast the Kenya AA.")
    assert texts[-1] == ("agent", "Roasted (roast: dark).")


async def test_it_shows_the_child_nested_on_the_page_and_in_the_admin(lead):
    owner, session_id = lead
    await delegate(session_id)
    [child] = await sync_to_async(_children)(session_id)
    client = Client()
    await sync_to_async(client.force_login)(owner)

    parent_page = (await sync_to_async(client.get)(f"/sessions/{session_id}/")).content.decode()
    child_page = (await sync_to_async(client.get)(f"/sessions/{child.key}/")).content.decode()
    chats = (await sync_to_async(client.get)("/sessions/")).content.decode()
    staff = await sync_to_async(get_user_model().objects.create_superuser)("boss", "", "pw-boss-1")
    await sync_to_async(client.force_login)(staff)
    admin = await sync_to_async(client.get)(
        f"/admin/conversations/session/{quote(session_id)}/change/"
    )

    assert f'href="/sessions/{child.key}/"' in parent_page
    assert "delegated by" in child_page and f'href="/sessions/{session_id}/"' in child_page
    assert child.key not in chats  # listed under its parent, not as a chat of its own
    assert "subagent sessions" in admin.content.decode().lower()
    assert child.pk in admin.content.decode()


async def test_it_does_not_let_children_delegate_past_the_depth_bound(settings, lead):
    _, session_id = lead
    settings.GLOVE_SUBAGENT_MAX_DEPTH = 1
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        **agents({"subagents": ["roaster"]}),  # the roaster could delegate to itself
    }
    from gloveapp.core.providers.registry import register_model_provider
    from tests.agents import subagent_agents

    offered: list[list[str]] = []

    def roaster_model(model: str = "", **kwargs):
        inner = subagent_agents.roaster_model()
        original = inner.prompt

        async def prompt(messages, tools, notify, abort=None):
            offered.append([t.name for t in tools or []])
            return await original(messages, tools, notify, abort)

        inner.prompt = prompt
        return inner

    register_model_provider(subagent_agents.ROASTER_MODEL, roaster_model, replace=True)
    try:
        await delegate(session_id)
    finally:
        register_models()
    assert offered and all("glove_invoke_subagent" not in names for names in offered)


async def test_it_stops_a_child_over_its_token_budget(settings, lead):
    _, session_id = lead
    settings.GLOVE_SUBAGENT_MAX_TOKENS = 50  # one scripted call costs 120

    await turns.submit_message(session_id=session_id, text="Please roast the Kenya AA")
    await turns.wait_until_idle(session_id)

    [result] = await sync_to_async(_subagent_results)(session_id)
    assert result["status"] == "error"
    assert result["message"] == (
        'Subagent "roaster" failed: it spent 120 tokens, over its budget of 50 '
        "(GLOVE_SUBAGENT_MAX_TOKENS)"
    )


async def test_a_delegation_is_traced_nested_and_its_calls_are_steps_of_the_parent_turn(
    lead, spans
):
    from gloveapp.turns.models import TurnStep

    _, session_id = lead
    await delegate(session_id)
    spans = spans.get_finished_spans()

    [parent] = [s for s in spans if s.name == "invoke_agent lead"]
    [child] = [s for s in spans if s.name == "invoke_agent roaster"]
    assert child.context.trace_id == parent.context.trace_id
    assert child.parent.span_id == parent.context.span_id
    assert child.attributes["glove.subagent.depth"] == 1
    child_chats = [
        s for s in spans if s.name.startswith("chat ") and s.parent.span_id == child.context.span_id
    ]
    assert child_chats, [s.name for s in spans]
    names = [
        step.name
        async for step in TurnStep.objects.filter(turn__session_id=session_id, kind="model")
    ]
    assert len(names) > 2  # the lead's calls and the roaster's, on the lead's turn
