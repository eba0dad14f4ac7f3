"""The tool frames a running turn streams, as a customer and as staff read them (issue 33).

A real turn of the coffee agent on an in-process worker, watched through the project's ASGI
application as clients watch it: the SSE stream (with a token) and the chat websocket (with
the login cookie), each by the session's owner and by a staff member. Everyone reads the
tool's label and the call's summary as the chat page shows them; only staff get the raw
arguments and the result's data, as only staff get the page's "Details".
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from rest_framework.authtoken.models import Token

from gloveapp.conversations.models import Session
from gloveapp.live.relay import stop_relay
from gloveapp.turns import public as turns
from tests.api.sse_asgi import SseStream
from tests.demo.conftest import next_slot, say
from tests.live.conftest import FRAME_TIMEOUT, cookie_for, open_socket

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
async def _stop_relay_after_test():
    yield
    await stop_relay()  # its connection, so the test database can be dropped


async def tool_frames_until(read, name: str) -> dict[str, dict]:
    """The tool frames of the call of `name`, read until its result."""
    seen: dict[str, dict] = {}
    while "tool_use_result" not in seen:
        frame = await read()
        if frame["type"] in ("tool_use", "tool_use_result") and frame["payload"]["name"] == name:
            seen[frame["type"]] = frame["payload"]
    return seen


def token_for(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


async def test_customers_read_the_pages_words_and_staff_the_raw_data_too(
    customer, staff, session_id
):
    session_key = await database_sync_to_async(session_key_of)(session_id)
    customer_token = await database_sync_to_async(token_for)(customer)
    staff_token = await database_sync_to_async(token_for)(staff)
    customer_cookie = await database_sync_to_async(cookie_for)(customer)
    staff_cookie = await database_sync_to_async(cookie_for)(staff)
    await say(session_id, "add Kenya AA")

    async with (
        SseStream(f"/api/sessions/{session_key}/events", customer_token) as customer_sse,
        SseStream(f"/api/sessions/{session_id}/events", staff_token) as staff_sse,
    ):
        assert customer_sse.status == staff_sse.status == 200
        customer_ws = await open_socket(session_key, customer_cookie)
        staff_ws = await open_socket(session_id, staff_cookie)
        await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
        slot = await next_slot(session_id)
        assert slot.renderer == "checkout"
        await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="confirm")
        seen = {
            "customer sse": await tool_frames_until(customer_sse.frame, "checkout"),
            "staff sse": await tool_frames_until(staff_sse.frame, "checkout"),
            "customer ws": await tool_frames_until(
                lambda: customer_ws.receive_json_from(timeout=FRAME_TIMEOUT), "checkout"
            ),
            "staff ws": await tool_frames_until(
                lambda: staff_ws.receive_json_from(timeout=FRAME_TIMEOUT), "checkout"
            ),
        }
        await customer_ws.disconnect()
        await staff_ws.disconnect()
    await turns.wait_until_idle(session_id)

    for who, frames in seen.items():
        call, result = frames["tool_use"], frames["tool_use_result"]
        # The page's words for everyone: the tool's label, the call's summary, its state.
        assert call["label"] == result["label"] == "Checkout", who
        assert call["summary"] == "Checkout: pay at pickup", who
        assert result["status"] == "success" and result["statusText"] == "done", who
        assert result["call_id"] == call["id"], who
        assert result["result"]["renderData"]["status"] == "placed", who
        assert "_reading" not in call and "_reading" not in result, who
        if who.startswith("staff"):
            assert call["input"] == {"payment": "pickup"}, who
            assert result["result"]["data"]["status"] == "placed", who
        else:
            # What the page keeps under staff's "Details" never reaches the customer.
            assert "input" not in call, who
            assert "data" not in result["result"], who
    # The same frame on both transports.
    assert seen["customer sse"] == seen["customer ws"]
    assert seen["staff sse"] == seen["staff ws"]


def session_key_of(session_id: str) -> str:
    return Session.objects.get(pk=session_id).key
