"""Talking to the coffee agent through the chat page: the composer, prompts and results.

The turn runs on the test's event loop (the page posts, the worker runs the turn in the background),
so these tests use the async client and wait for the session to go idle, never for a clock.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from gloveapp.conversations.services import session_create
from gloveapp.turns import public as turns

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    # A turn worker in the test's loop; its thread's database connection closed after.
    pytest.mark.usefixtures("close_worker_connections", "turn_worker"),
]

HX = {"HX-Request": "true"}


@pytest.fixture
def customer(transactional_db):
    return get_user_model().objects.create_user("carla", password="pw-carla-1")


@pytest.fixture
def session_id(customer) -> str:
    return session_create(owner=customer, agent_name="coffee", title="Brew").pk


@pytest.fixture
async def client(customer) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(customer)
    return client


async def say(client: AsyncClient, session_id: str, text: str) -> None:
    response = await client.post(f"/sessions/{session_id}/messages", {"text": text}, headers=HX)
    assert response.status_code == 200
    await turns.wait_until_idle(session_id)


async def page(client: AsyncClient, session_id: str, target: str | None = None) -> str:
    headers = {**HX, "HX-Target": target} if target else {}
    response = await client.get(f"/sessions/{session_id}/", headers=headers)
    assert response.status_code == 200
    return response.content.decode()


async def next_slot(session_id: str) -> turns.SlotView:
    """Wait on the loop (not a clock) until the running turn shows a prompt."""
    while not (slots := await sync_to_async(turns.visible_slots)(session_id)):
        assert await sync_to_async(turns.is_busy)(session_id), "the turn ended without a prompt"
        await asyncio.sleep(0.005)
    return slots[-1]


async def test_it_posts_the_message_and_shows_it_before_the_turn_stores_it(client, session_id):
    response = await client.post(
        f"/sessions/{session_id}/messages", {"text": "What coffees do you have?"}, headers=HX
    )

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="messages"')
    assert "What coffees do you have?" in html
    await turns.wait_until_idle(session_id)


async def test_it_shows_the_agents_reply_after_the_turn(client, session_id):
    await say(client, session_id, "hello")

    html = await page(client, session_id, "messages")

    assert html.count('class="msg msg--user"') == 1
    assert "offline demo model" in html


async def test_it_posts_without_javascript_and_redirects_back_to_the_chat(client, session_id):
    response = await client.post(f"/sessions/{session_id}/messages", {"text": "hello"})

    assert response.status_code == 303
    assert response["Location"] == f"/sessions/{session_id}/"
    await turns.wait_until_idle(session_id)
    assert "hello" in await page(client, session_id)


async def test_it_refuses_an_empty_message_without_starting_a_turn(client, session_id):
    plain = await client.post(f"/sessions/{session_id}/messages", {"text": "   "})
    htmx = await client.post(f"/sessions/{session_id}/messages", {"text": ""}, headers=HX)

    assert plain.status_code == 400
    assert htmx.status_code == 422
    assert htmx["HX-Retarget"] == "#composer"
    assert "Write a message first." in htmx.content.decode()
    assert not (await sync_to_async(turns.is_busy)(session_id))


async def test_it_draws_past_tool_results_with_their_colocated_template(client, session_id):
    await say(client, session_id, "show me the menu")

    html = await page(client, session_id)  # a fresh page load, long after the turn

    assert 'class="tool-card coffee-catalogue"' in html
    assert "Ethiopia Yirgacheffe" in html


async def test_it_shows_a_checkout_prompt_and_resumes_the_tool_when_it_is_answered(
    client, session_id
):
    await say(client, session_id, "add 2 Kenya AA")
    await client.post(
        f"/sessions/{session_id}/messages", {"text": "checkout, pay at pickup"}, headers=HX
    )
    slot = await next_slot(session_id)

    html = await page(client, session_id, "slots")
    assert f'action="/sessions/{session_id}/slots/{slot.id}"' in html
    assert "Confirm your order" in html

    response = await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": "confirm"})
    assert response.status_code == 303
    await turns.wait_until_idle(session_id)

    html = await page(client, session_id)
    assert "Order #" in html
    assert 'class="tool-card coffee-receipt"' in html
    assert "Confirm your order" not in html  # hide-on-complete: the prompt is gone


async def test_it_answers_a_prompt_in_place_for_htmx_with_a_json_answer(client, session_id):
    await say(client, session_id, "add Colombia Huila")
    await client.post(
        f"/sessions/{session_id}/messages", {"text": "checkout, pay at pickup"}, headers=HX
    )
    slot = await next_slot(session_id)

    response = await client.post(
        f"/sessions/{session_id}/slots/{slot.id}", {"json": '{"confirmed": true}'}, headers=HX
    )

    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<section id="slots"')
    await turns.wait_until_idle(session_id)
    assert "Order #" in await page(client, session_id, "messages")


async def test_it_answers_a_prompt_only_once(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(
        f"/sessions/{session_id}/messages", {"text": "checkout, pay at pickup"}, headers=HX
    )
    slot = await next_slot(session_id)
    url = f"/sessions/{session_id}/slots/{slot.id}"

    first = await client.post(url, {"value": "cancel"})
    second = await client.post(url, {"value": "confirm"})

    assert first.status_code == 303
    assert second.status_code == 404
    await turns.wait_until_idle(session_id)
    assert "Order #" not in await page(client, session_id)


async def test_it_refuses_a_malformed_json_answer(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(
        f"/sessions/{session_id}/messages", {"text": "checkout, pay at pickup"}, headers=HX
    )
    slot = await next_slot(session_id)

    response = await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"json": "{nope"})

    assert response.status_code == 400
    assert (await sync_to_async(turns.visible_slots)(session_id))[-1].id == slot.id  # still waiting
    await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": "cancel"})
    await turns.wait_until_idle(session_id)


async def test_it_refuses_a_message_with_a_nul_character_without_starting_a_turn(
    client, session_id
):
    response = await client.post(f"/sessions/{session_id}/messages", {"text": "hi\x00there"})

    assert response.status_code == 400
    assert "NUL" in response.content.decode()
    assert not (await sync_to_async(turns.is_busy)(session_id))


async def test_it_refuses_an_answer_nested_too_deeply(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(
        f"/sessions/{session_id}/messages", {"text": "checkout, pay at pickup"}, headers=HX
    )
    slot = await next_slot(session_id)

    deep = "[" * 200_000 + "]" * 200_000
    response = await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"json": deep})

    assert response.status_code == 400
    assert (await sync_to_async(turns.visible_slots)(session_id))[-1].id == slot.id  # still waiting
    await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": "cancel"})
    await turns.wait_until_idle(session_id)


async def test_it_refuses_messages_past_the_queue_limit_while_a_turn_runs(
    client, session_id, settings
):
    settings.GLOVE_MAX_QUEUED_MESSAGES = 1
    await say(client, session_id, "add Kenya AA")
    await client.post(
        f"/sessions/{session_id}/messages", {"text": "checkout, pay at pickup"}, headers=HX
    )
    slot = await next_slot(session_id)  # the turn now waits on the customer

    queued = await client.post(f"/sessions/{session_id}/messages", {"text": "menu"})
    refused = await client.post(f"/sessions/{session_id}/messages", {"text": "menu again"})

    assert queued.status_code == 303
    assert refused.status_code == 429
    assert "already waiting" in refused.content.decode()
    assert (await sync_to_async(turns.queued)(session_id)) == 1
    await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": "cancel"})
    await turns.wait_until_idle(session_id)


async def test_it_asks_permission_in_the_page_before_charging_the_saved_card(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    permission = await next_slot(session_id)

    html = await page(client, session_id, "slots")
    assert permission.renderer == "permission_request"
    for value in ("once", "always", "always_deny"):
        assert f'value="{value}"' in html
    # One "no": this call only, with an optional reason (the approvals' reject).
    assert html.count("Don't allow") == 1 and 'name="decision" value="reject"' in html
    # What the call does, in words: not the tool's name or its JSON.
    assert "Checkout: pay with the saved card" in html and "&quot;" not in html

    await client.post(f"/sessions/{session_id}/slots/{permission.id}", {"value": "once"})
    confirm = await next_slot(session_id)
    assert confirm.id != permission.id
    await client.post(f"/sessions/{session_id}/slots/{confirm.id}", {"value": "confirm"})
    await turns.wait_until_idle(session_id)

    assert "paid with saved card" in await page(client, session_id)


async def test_it_does_not_run_the_tool_when_permission_is_denied(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    permission = await next_slot(session_id)

    await client.post(f"/sessions/{session_id}/slots/{permission.id}", {"value": "deny"})
    await turns.wait_until_idle(session_id)

    html = await page(client, session_id)
    assert "Order #" not in html
    assert "You didn&#x27;t allow checkout, so it did not run." in html


async def test_it_shows_the_inbox_watch_the_agent_posts(client, session_id):
    await say(client, session_id, "do you have Yirgacheffe?")
    await say(client, session_id, "yes, notify me")

    html = await page(client, session_id, "inbox")
    watching = html.split('data-section="watching"')[1].split("</ul>")[0]
    assert "Restock watch" in watching and "restock_watch" not in watching


async def test_it_shows_nothing_in_the_slots_panel_for_another_session(client, customer):
    other = await sync_to_async(session_create)(owner=customer, agent_name="coffee")
    assert 'class="slot"' not in await page(client, other.pk, "slots")


async def test_it_shows_staff_a_waiting_prompt_without_letting_them_answer(
    client, session_id, transactional_db
):
    staff = await sync_to_async(get_user_model().objects.create_user)(
        "stella", password="pw-stella-1", is_staff=True
    )
    staff_client = AsyncClient()
    await staff_client.aforce_login(staff)
    await say(client, session_id, "add Kenya AA")
    await client.post(
        f"/sessions/{session_id}/messages", {"text": "checkout, pay at pickup"}, headers=HX
    )
    slot = await next_slot(session_id)

    html = await page(staff_client, session_id, "slots")
    refused = await staff_client.post(
        f"/sessions/{session_id}/slots/{slot.id}", {"value": "confirm"}
    )

    assert "Waiting for the customer to answer the checkout" in html
    assert "<form" not in html
    assert refused.status_code == 404
    await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": "cancel"})
    await turns.wait_until_idle(session_id)


async def test_it_lists_every_queued_message_in_order_and_the_running_one_once(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    await next_slot(session_id)  # the turn waits on the customer: what follows queues
    for text in ("first", "second", "third"):
        await client.post(f"/sessions/{session_id}/messages", {"text": text}, headers=HX)

    html = await page(client, session_id)  # a reload
    queue = html.split('class="queue"')[1].split("</ol>")[0]
    states = [chunk.split('"')[0] for chunk in queue.split('data-state="')[1:]]
    # The running turn's message is in the history already: one bubble per message.
    assert states == ["queued", "queued", "queued"]
    history = html.split('class="queue"')[0]
    assert history.count(">checkout<") == 1 and ">checkout<" not in queue
    assert queue.index("first") < queue.index("second")
    assert queue.index("second") < queue.index("third")
    assert queue.count("Withdraw") == 3
    await client.post(f"/sessions/{session_id}/cancel")
    await turns.wait_until_idle(session_id)


async def test_it_withdraws_a_queued_message_before_it_runs(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    slot = await next_slot(session_id)
    await client.post(f"/sessions/{session_id}/messages", {"text": "show the menu"}, headers=HX)
    turn_id = (
        (await page(client, session_id))
        .split('data-state="queued"')[0]
        .rsplit('data-turn="', 1)[1]
        .split('"')[0]
    )

    response = await client.post(f"/sessions/{session_id}/turns/{turn_id}/withdraw", headers=HX)
    again = await client.post(f"/sessions/{session_id}/turns/{turn_id}/withdraw")

    assert response.status_code == 200 and "show the menu" not in response.content.decode()
    assert again.status_code == 409
    await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": "deny_once"})
    await turns.wait_until_idle(session_id)
    assert "show the menu" not in await page(client, session_id)


async def test_it_shows_a_stopped_checkout_as_stopped_and_who_stopped_it(
    client, session_id, customer
):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    await next_slot(session_id)

    await client.post(f"/sessions/{session_id}/cancel")
    await turns.wait_until_idle(session_id)

    html = await page(client, session_id)
    card = html.split('data-tool="checkout"')[1].split("</li>")[0]
    assert 'data-status="stopped"' in card and "running…" not in html
    assert "Stopped by carla at " in html
    stored = (await client.get(f"/api/sessions/{session_id}/messages")).json()
    result = stored[-1]["tool_results"][0]["result"]  # the REST store says the same
    assert (result["status"], result["data"]["stoppedBy"]) == ("aborted", "carla")


async def test_it_asks_again_after_deny_once(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    first = await next_slot(session_id)
    await client.post(f"/sessions/{session_id}/slots/{first.id}", {"value": "deny_once"})
    await turns.wait_until_idle(session_id)

    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    second = await next_slot(session_id)

    assert second.renderer == "permission_request" and second.id != first.id
    assert "None: tools that need your permission" in await page(client, session_id)
    await client.post(f"/sessions/{session_id}/slots/{second.id}", {"value": "deny_once"})
    await turns.wait_until_idle(session_id)


async def test_it_lists_an_always_deny_and_resets_it_from_the_page(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    slot = await next_slot(session_id)
    await client.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": "always_deny"})
    await turns.wait_until_idle(session_id)
    listed = await page(client, session_id, "permissions")
    permission = listed.split('name="permission" value="')[1].split('"')[0]

    reset = await client.post(
        f"/sessions/{session_id}/permissions/reset", {"permission": permission}, headers=HX
    )
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    again = await next_slot(session_id)

    assert "<strong>Checkout</strong>: Always denied" in listed  # its label, not its name
    assert "Always denied" not in reset.content.decode()
    assert again.renderer == "permission_request"
    await client.post(f"/sessions/{session_id}/slots/{again.id}", {"value": "deny_once"})
    await turns.wait_until_idle(session_id)


async def test_a_permission_prompt_takes_approve_and_reject_with_a_reason(client, session_id):
    await say(client, session_id, "add Kenya AA")
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    first = await next_slot(session_id)
    assert 'name="decision" value="reject"' in await page(client, session_id, "slots")

    bad = await client.post(f"/sessions/{session_id}/slots/{first.id}", {"decision": "edit"})
    rejected = await client.post(
        f"/sessions/{session_id}/slots/{first.id}",
        {"decision": "reject", "reason": "Not on the saved card"},
    )
    await turns.wait_until_idle(session_id)

    assert bad.status_code == 400 and rejected.status_code == 303
    stored = (await client.get(f"/api/sessions/{session_id}/messages")).json()
    result = [m for m in stored if m.get("tool_results")][-1]["tool_results"][0]["result"]
    assert result["status"] == "error"
    assert result["message"].endswith("Reason: Not on the saved card")
    # A rejection is for this call only, as "deny once": the next checkout asks again.
    await client.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    second = await next_slot(session_id)
    assert second.renderer == "permission_request" and second.id != first.id
    await client.post(f"/sessions/{session_id}/slots/{second.id}", {"value": "reject"})
    await turns.wait_until_idle(session_id)
    assert "None: tools that need your permission" in await page(client, session_id)
