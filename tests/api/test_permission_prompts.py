"""`/api/sessions/<id>/permission-prompts`: a turn's "may this tool run?" answered over REST,
as on the chat page. The turn is driven to the prompt through the chat page (the coffee
demo's checkout asks before charging the saved card), runs on the test's event loop, and
the tests wait for the session to go idle, never for a clock."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient
from rest_framework.authtoken.models import Token

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
    return get_user_model().objects.create_user("carla")


@pytest.fixture
def session_id(customer) -> str:
    return session_create(owner=customer, session_id="brew", agent_name="coffee").key


class TokenClient:
    """An API caller with a token (AsyncClient's own `headers=` reach only its sync twin's
    requests, so the header goes with each request)."""

    def __init__(self, user) -> None:
        token, _ = Token.objects.get_or_create(user=user)
        self.headers = {"Authorization": f"Token {token.key}"}
        self.client = AsyncClient()

    async def get(self, path: str, data: dict | None = None):
        return await self.client.get(path, data, headers=self.headers)

    async def post(self, path: str, body: dict):
        return await self.client.post(
            path, body, content_type="application/json", headers=self.headers
        )


@pytest.fixture
def api(customer) -> TokenClient:
    return TokenClient(customer)


@pytest.fixture
def outsider_api(transactional_db) -> TokenClient:
    return TokenClient(get_user_model().objects.create_user("oscar"))


@pytest.fixture
async def page(customer) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(customer)
    return client


async def next_slot(session_id: str) -> turns.SlotView:
    """Wait on the loop (not a clock) until the running turn shows a prompt."""
    while not (slots := await sync_to_async(turns.visible_slots)(session_id)):
        assert await sync_to_async(turns.is_busy)(session_id), "the turn ended without a prompt"
        await asyncio.sleep(0.005)
    return slots[-1]


async def checkout_asks_permission(page: AsyncClient, session_id: str) -> turns.SlotView:
    await page.post(f"/sessions/{session_id}/messages", {"text": "add Kenya AA"}, headers=HX)
    await turns.wait_until_idle(session_id)
    await page.post(f"/sessions/{session_id}/messages", {"text": "checkout"}, headers=HX)
    prompt = await next_slot(session_id)
    assert prompt.renderer == "permission_request"
    return prompt


async def answer(api: TokenClient, session_id: str, prompt_id: str, body: dict):
    return await api.post(f"/api/sessions/{session_id}/permission-prompts/{prompt_id}", body)


async def finish(page: AsyncClient, session_id: str) -> None:
    """Answer whatever the turn still waits on with a no, and let it end."""
    while await sync_to_async(turns.is_busy)(session_id):
        slots = await sync_to_async(turns.visible_slots)(session_id)
        for slot in slots:
            value = "deny_once" if slot.renderer == "permission_request" else "cancel"
            await page.post(f"/sessions/{session_id}/slots/{slot.id}", {"value": value})
        await asyncio.sleep(0.005)


async def test_it_lists_the_prompt_and_the_turn_goes_on_after_the_answer(api, page, session_id):
    prompt = await checkout_asks_permission(page, session_id)

    listed = await api.get(f"/api/sessions/{session_id}/permission-prompts")
    answered = await answer(api, session_id, prompt.id, {"value": "once"})
    confirm = await next_slot(session_id)  # the turn went on: the checkout's own prompt

    assert listed.status_code == 200, listed.content
    (shown,) = listed.json()
    assert (shown["id"], shown["toolName"], shown["callId"]) == (
        prompt.id,
        "checkout",
        prompt.call_id,
    )
    assert shown["toolInput"] == {"payment": "saved_card"}
    assert shown["createdAt"].endswith("Z")
    assert answered.status_code == 200 and answered.json() == {"ok": True}
    assert confirm.id != prompt.id and confirm.renderer != "permission_request"
    assert (await api.get(f"/api/sessions/{session_id}/permission-prompts")).json() == []
    await page.post(f"/sessions/{session_id}/slots/{confirm.id}", {"value": "confirm"})
    await turns.wait_until_idle(session_id)
    stored = (await api.get(f"/api/sessions/{session_id}/messages")).json()
    assert "paid with your saved card" in stored[-1]["text"]


async def test_a_rejection_with_a_reason_reaches_the_agent(api, page, session_id):
    prompt = await checkout_asks_permission(page, session_id)

    rejected = await answer(
        api, session_id, prompt.id, {"decision": "reject", "reason": "Not on the saved card"}
    )
    await turns.wait_until_idle(session_id)

    assert rejected.status_code == 200
    stored = (await api.get(f"/api/sessions/{session_id}/messages")).json()
    result = [m for m in stored if m.get("tool_results")][-1]["tool_results"][0]["result"]
    assert result["status"] == "error"
    assert result["message"].endswith("Reason: Not on the saved card")


async def test_always_is_remembered_like_on_the_page(api, page, session_id):
    prompt = await checkout_asks_permission(page, session_id)

    await answer(api, session_id, prompt.id, {"value": "always"})
    await finish(page, session_id)

    remembered = await api.get(
        f"/api/sessions/{session_id}/permissions",
        {"toolName": "checkout", "input": '{"payment": "saved_card"}'},
    )
    assert remembered.json() == {"status": "granted"}


async def test_a_second_answer_is_a_409(api, page, session_id):
    prompt = await checkout_asks_permission(page, session_id)

    first = await answer(api, session_id, prompt.id, {"decision": "approve"})
    second = await answer(api, session_id, prompt.id, {"decision": "reject"})
    await finish(page, session_id)
    after_the_turn = await answer(api, session_id, prompt.id, {"value": "once"})

    assert first.status_code == 200
    assert second.status_code == after_the_turn.status_code == 409
    assert second.json()["error"] == "This permission prompt is no longer waiting for an answer."


async def test_an_outsider_gets_the_same_404_as_for_no_session(api, outsider_api, page, session_id):
    prompt = await checkout_asks_permission(page, session_id)

    theirs = [
        await outsider_api.get(f"/api/sessions/{session_id}/permission-prompts"),
        await answer(outsider_api, session_id, prompt.id, {"value": "once"}),
    ]
    missing = [
        await outsider_api.get("/api/sessions/glove_nobody/permission-prompts"),
        await answer(outsider_api, "glove_nobody", prompt.id, {"value": "once"}),
    ]

    assert [r.status_code for r in theirs] == [r.status_code for r in missing] == [404, 404]
    assert [r.json() for r in theirs] == [r.json() for r in missing]
    assert (await api.get(f"/api/sessions/{session_id}/permission-prompts")).json()
    await finish(page, session_id)


async def test_only_a_permission_prompt_of_the_session_is_answered(api, page, session_id):
    prompt = await checkout_asks_permission(page, session_id)
    await answer(api, session_id, prompt.id, {"value": "once"})
    confirm = await next_slot(session_id)  # the tool's own prompt, not a permission one

    not_permission = await answer(api, session_id, confirm.id, {"value": "once"})
    unknown = await answer(api, session_id, "t999999-nope", {"value": "once"})

    assert not_permission.status_code == unknown.status_code == 404
    assert not_permission.json() == unknown.json() == {"error": "Permission prompt not found."}
    assert [s.id for s in await sync_to_async(turns.visible_slots)(session_id)] == [confirm.id]
    await finish(page, session_id)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "decision"),
        ({"value": "maybe"}, "value"),
        ({"decision": "edit"}, "decision"),
        ({"decision": "approve", "value": "once"}, "decision"),
        ({"value": "once", "reason": "because"}, "reason"),
        ({"decision": "reject", "reason": 7}, "reason"),
    ],
)
async def test_it_refuses_a_malformed_answer_naming_the_field(api, page, session_id, body, field):
    prompt = await checkout_asks_permission(page, session_id)

    refused = await answer(api, session_id, prompt.id, body)

    assert refused.status_code == 400
    assert refused.json()["field"] == field
    still = (await api.get(f"/api/sessions/{session_id}/permission-prompts")).json()
    assert [p["id"] for p in still] == [prompt.id]
    await finish(page, session_id)
