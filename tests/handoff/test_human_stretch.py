"""A human stretch end to end on PostgreSQL with a real turn worker, driven by a model that
obeys its context (`tests.fakes.obedient_model`): it stays silent while its context says a
person answers, so the agent answering after a hand-back shows the end marker is there.

In each scenario no agent message is stored while the chat is not the agent's.
"""

from __future__ import annotations

import asyncio
import io

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from gloveapp.conversations import handoff
from gloveapp.conversations.models import HandoffRecord, Message, Session
from gloveapp.conversations.services import session_create
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from tests.handoff.conftest import agent_messages

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


async def _say(session_id: str, text: str) -> None:
    await turns.submit_message(session_id=session_id, text=text)
    await asyncio.wait_for(turns.wait_until_idle(session_id), 30)


def _last_seq(session_id: str) -> int:
    return Session.objects.values_list("last_seq", flat=True).get(pk=session_id)


def _state(session_id: str) -> str:
    return Session.objects.values_list("answerer", flat=True).get(pk=session_id)


last_seq = sync_to_async(_last_seq)
state = sync_to_async(_state)
agent_texts = sync_to_async(agent_messages)


@pytest.fixture
def chat(obedient, customer) -> str:
    return session_create(owner=customer, agent_name="obedient", title="Chat").pk


async def test_it_hands_a_chat_to_a_person_and_back(turn_worker, chat, customer, bea):
    await _say(chat, "hello")
    assert await agent_texts(chat) == ["Agent: hello"]
    await sync_to_async(handoff.handoff_request)(
        session_id=chat,
        reason="wants a refund",
        actor=handoff.Actor(user=customer),
        via="page",
        group="baristas",
    )
    start = await last_seq(chat)
    assert await state(chat) == "queued"

    await _say(chat, "is anyone there?")  # stored for the person, no turn runs
    await sync_to_async(handoff.handoff_claim)(session_id=chat, staff=bea)
    await sync_to_async(handoff.staff_reply)(session_id=chat, staff=bea, text="Bea here.")
    await _say(chat, "I want my money back")
    await sync_to_async(handoff.staff_note)(session_id=chat, staff=bea, text="VIP, be kind")
    end = await last_seq(chat)
    await sync_to_async(handoff.handoff_hand_back)(
        session_id=chat, staff=bea, summary="Refunded the order."
    )
    assert await state(chat) == "agent"

    await _say(chat, "and my points?")
    assert await agent_texts(chat, after=start, upto=end) == []
    assert (await agent_texts(chat))[-1] == "Agent: and my points?"

    def facts():
        rows = list(Message.objects.filter(session_id=chat).order_by("seq"))
        customer_texts = [r.text for r in rows if r.sender == "user" and not r.framework_context]
        person = [r for r in rows if (r.extra or {}).get("author")]
        notes = [r.text for r in rows if r.framework_context == "handoff"]
        kinds = list(HandoffRecord.objects.filter(session_id=chat).values_list("kind", flat=True))
        events = list(
            LiveEvent.objects.filter(
                stream=session_stream(chat), type="session.answerer"
            ).values_list("payload", flat=True)
        )
        return customer_texts, person, notes, kinds, events

    customer_texts, person, notes, kinds, events = await sync_to_async(facts)()
    assert customer_texts == ["hello", "is anyone there?", "I want my money back", "and my points?"]
    assert [r.text for r in person] == ["Bea here."]
    assert person[0].sender == "agent"
    assert person[0].extra["author"]["label"] == "Bea from the baristas"
    assert notes[-1].startswith(handoff.HANDOFF_ENDED)
    assert "Bea from the baristas" in notes[-1] and "Refunded the order." in notes[-1]
    assert f"messages {start + 1} to {end}" in notes[-1]
    assert all("VIP" not in note for note in notes)  # the internal note is no message
    assert kinds == ["requested", "claimed", "note", "handed_back"]
    assert [e["answerer"]["state"] for e in events] == ["queued", "person", "agent"]
    assert (
        events[1]["text"] == "Bea joined the chat." or "Bea from the baristas" in events[1]["text"]
    )


async def test_the_agent_hands_off_by_its_tool(turn_worker, chat, bea):
    await _say(chat, "I want a person please")
    assert await state(chat) == "queued"
    asked = await last_seq(chat)
    # Its own closing words after asking, then nothing more from it.
    assert (await agent_texts(chat))[-1] == "I have asked for a person; they will answer you here."
    await _say(chat, "hello?")
    await sync_to_async(handoff.handoff_claim)(session_id=chat, staff=bea)
    await sync_to_async(handoff.staff_reply)(session_id=chat, staff=bea, text="Hi, Bea.")
    end = await last_seq(chat)
    await sync_to_async(handoff.handoff_hand_back)(session_id=chat, staff=bea, summary="Done")
    await _say(chat, "thanks, and a latte")
    assert await agent_texts(chat, after=asked, upto=end) == []
    assert (await agent_texts(chat))[-1] == "Agent: thanks, and a latte"

    def records():
        return list(HandoffRecord.objects.filter(session_id=chat).values_list("kind", "via"))

    assert (await sync_to_async(records)())[0] == ("requested", "tool")


async def test_a_take_over_withholds_the_running_turns_reply(turn_worker, chat, obedient, bea):
    obedient.RELEASE = asyncio.Event()
    await turns.submit_message(session_id=chat, text="slow question")
    await asyncio.wait_for(obedient.STARTED.wait(), 30)
    before = await last_seq(chat)
    await sync_to_async(handoff.handoff_take_over)(session_id=chat, staff=bea, reason="VIP")
    obedient.RELEASE.set()
    await asyncio.wait_for(turns.wait_until_idle(chat), 30)
    assert await agent_texts(chat, after=before) == []

    def turn_of():
        return Turn.objects.filter(session_id=chat).values_list("status", "error", "notice").get()

    assert await sync_to_async(turn_of)() == (
        "done",
        "withheld: a person answers this chat",
        "A person took the chat over; the agent's reply was withheld.",
    )
    await sync_to_async(handoff.staff_reply)(session_id=chat, staff=bea, text="Bea here")
    end = await last_seq(chat)
    await sync_to_async(handoff.handoff_hand_back)(session_id=chat, staff=bea, summary="ok")
    await _say(chat, "next one")
    assert await agent_texts(chat, after=before, upto=end) == []
    assert (await agent_texts(chat))[-1] == "Agent: next one"


async def test_a_hand_back_survives_compaction(turn_worker, chat, customer, bea, settings):
    await _say(chat, "hello")
    await sync_to_async(handoff.handoff_take_over)(session_id=chat, staff=bea)
    start = await last_seq(chat)
    await sync_to_async(handoff.staff_reply)(session_id=chat, staff=bea, text="Bea here")
    end = await last_seq(chat)
    await sync_to_async(handoff.handoff_hand_back)(session_id=chat, staff=bea, summary="Fixed")
    # Past the compaction limit: the next turn summarises the chat first, and the summary
    # (lossy: it keeps "[Handoff started]" and drops the end) is all the model sees.
    await sync_to_async(Session.objects.filter(pk=chat).update)(token_count=10_000_000)
    await _say(chat, "after the summary")

    def summary():
        return (
            Message.objects.filter(session_id=chat, is_compaction=True)
            .values_list("text", flat=True)
            .last()
        )

    text = await sync_to_async(summary)()
    assert text is not None and handoff.HANDOFF_STARTED in text
    assert handoff.HANDOFF_ENDED in text.split("[Notes kept from before the summary]")[1]
    assert (await agent_texts(chat))[-1] == "Agent: after the summary"
    assert await agent_texts(chat, after=start, upto=end) == []


async def test_the_agent_hands_off_after_failed_turns(turn_worker, chat, obedient, monkeypatch):
    async def broken(messages, tools):
        raise RuntimeError("model down")

    monkeypatch.setattr(obedient, "_respond", broken)
    await _say(chat, "one")
    assert await state(chat) == "agent"
    await _say(chat, "two")
    assert await state(chat) == "queued"

    def reason():
        return HandoffRecord.objects.filter(session_id=chat).values_list("via", "group").get()

    assert await sync_to_async(reason)() == ("rule", "baristas")


async def test_a_hand_back_that_holds_is_counted_on_metrics_and_the_usage_page(
    turn_worker, chat, customer, bea, settings, admin_user
):
    from django.test import Client

    from tests.observe.test_metrics import TOKEN, samples, value
    from tests.observe.test_usage_page import chart_data

    settings.GLOVE_METRICS_TOKEN = TOKEN

    def scraped() -> float:
        answer = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        return value(
            samples(answer.content.decode()),
            "glove_handoff_resolved_after_hand_back_total",
            gen_ai_agent_name="obedient",
        )

    before = await sync_to_async(scraped)()
    await _say(chat, "hello")
    await sync_to_async(handoff.handoff_request)(
        session_id=chat, actor=handoff.Actor(user=customer), via="page"
    )
    await sync_to_async(handoff.handoff_claim)(session_id=chat, staff=bea)
    await sync_to_async(handoff.handoff_hand_back)(session_id=chat, staff=bea, summary="ok")
    await _say(chat, "one")
    await _say(chat, "two")  # the second turn after the hand-back counts nothing more
    assert await sync_to_async(scraped)() - before == 1

    def usage_page() -> str:
        # The days summed, as the turn worker's scheduler does every few minutes.
        call_command("usage_rollup", stdout=io.StringIO())
        client = Client()
        client.force_login(admin_user)
        return client.get("/admin/usage/?days=7").content.decode()

    page = await sync_to_async(usage_page)()
    assert "data-hand-backs>1<" in page
    assert "data-resolved-after-hand-back>1<" in page
    assert 'data-handoff-rate="obedient"><td>obedient</td><td>1</td><td>3</td><td>33.3 %' in page
    charts = chart_data(page)["charts"]
    assert charts["hand_backs"]["datasets"][1] == {
        "label": "resolved after",
        "data": [0, 0, 0, 0, 0, 0, 1],
    }
    [p50, p95] = charts["handoff_wait"]["datasets"]
    assert 0 <= p50["data"][-1] <= p95["data"][-1]
