"""The coffee demo driven end to end with no HTML, through the Python client (issue 33).

A real server (Daphne) and a real turn worker in processes of their own: the customer
starts turns over REST, reads them as Server-Sent Events, answers the permission prompt
and the "Confirm your order" slot over the API; a barista decides the large order's
approval over REST. The stream is dropped mid-turn and resumed with `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from gloveapp.remote.agent_client import AgentApiError, AgentClient, AsyncAgentClient, StreamEvent
from tests.api.liveserver import LiveServer

# A server, a worker and setup_demo of its own: slow on a busy machine (each test takes
# 5-40 s here; a turn that never ends fails with the server's and worker's logs).
pytestmark = [pytest.mark.apart, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def shop():
    with LiveServer() as server:
        server.manage("setup_demo")
        server.start_worker()
        yield server


@pytest.fixture(scope="module")
def customer_token(shop) -> str:
    return shop.token_for("api-customer")


@pytest.fixture(scope="module")
def barista_token(shop) -> str:
    return shop.token_for("barista")  # setup_demo's barista: staff, group "baristas"


def orders_of(shop: LiveServer, session_id: str) -> int:
    return int(
        shop.manage(
            "shell",
            "-c",
            "from gloveapp.demo.models import Order; "
            f"print(Order.objects.filter(session__key={session_id!r}).count())",
        ).split()[-1]
    )


def run_turn(
    glove: AgentClient, staff: AgentClient, session_id: str, text: str, answered: list
) -> list[StreamEvent]:
    """Start a turn and follow it to its end, answering what it asks as a person would."""
    turn = glove.start_turn(session_id, text)
    events = []
    for event in glove.stream(session_id, since=turn["lastEventId"], until_turn=turn["turnId"]):
        events.append(event)
        if event.type == "slot.pushed":
            answer_slot(glove, staff, session_id, event.payload["slot_id"], answered)
    assert events[-1].type == "turn.finished", events[-1]
    return events


def answer_slot(
    glove: AgentClient, staff: AgentClient, session_id: str, slot_id: str, answered: list
) -> None:
    [slot] = [slot for slot in glove.slots(session_id) if slot["id"] == slot_id]
    if slot["answeredBy"] == "owner":
        if slot["renderer"] == "permission_request":
            assert "once" in slot["answerSchema"]["oneOf"][0]["enum"]
            glove.answer_slot(session_id, slot_id, "once")
        else:
            assert slot["answerSchema"]["required"] == ["confirmed"]
            glove.answer_slot(session_id, slot_id, {"confirmed": True})
            with pytest.raises(AgentApiError) as second:  # one answer wins
                glove.answer_slot(session_id, slot_id, {"confirmed": True})
            assert second.value.status == 409
        answered.append(slot["renderer"])
    elif slot["answeredBy"] == "staff":
        queue = staff._call("GET", "approvals/?view=all&status=open").json()["results"]
        [request] = [row for row in queue if row["tool"] == "checkout"]
        decided = staff.decide_approval(
            request["id"], "approve", fingerprint=request["fingerprint"]
        )
        assert decided["status"] == "decided"
        answered.append("approval")


def reply_of(events: list[StreamEvent]) -> str:
    return events[-1].payload["text"]


def test_the_coffee_demo_end_to_end_over_rest_and_sse(shop, customer_token, barista_token):
    with (
        AgentClient(shop.url, token=customer_token) as glove,
        AgentClient(shop.url, token=barista_token) as staff,
    ):
        session_id = glove.create_session(agent="coffee", title="API order")
        answered: list[str] = []

        # A restock watch: the agent offers one for the out-of-stock coffee and posts it.
        offered = run_turn(glove, staff, session_id, "Do you have Yirgacheffe?", answered)
        assert "Shall I watch" in reply_of(offered)
        watched = run_turn(glove, staff, session_id, "yes please", answered)
        [change] = [event for event in watched if event.type == "inbox.changed"]
        assert change.payload["item"]["tag"] == "restock_watch"
        assert change.payload["item"]["status"] == "pending"

        # A large order paid with the saved card: the customer's permission prompt, a
        # barista's approval and the "Confirm your order" slot, all over the API.
        run_turn(glove, staff, session_id, "add 6 Colombia", answered)
        checkout = run_turn(glove, staff, session_id, "checkout", answered)
        assert sorted(answered) == ["approval", "checkout", "permission_request"]
        assert "is placed" in reply_of(checkout)
        assert orders_of(shop, session_id) == 1
        assert glove.slots(session_id) == []
        turn_id = checkout[-1].payload["turn"]
        assert glove.turn(session_id, turn_id)["state"] == "done"


def test_a_stream_dropped_mid_turn_resumes_with_every_event_once_in_order(
    shop, customer_token, barista_token
):
    with AgentClient(shop.url, token=customer_token) as glove:
        session_id = glove.create_session(agent="coffee")
        with AgentClient(shop.url, token=barista_token) as staff:
            run_turn(glove, staff, session_id, "add 2 Kenya AA", [])
        turn = glove.start_turn(session_id, "checkout, I'll pay at pickup")
        url = f"{shop.url}/api/sessions/{session_id}/events"
        headers = {"Authorization": f"Token {customer_token}"}
        before: list[dict] = []
        # The first connection reads until the turn waits on its confirm slot, then drops.
        with httpx.stream(
            "GET",
            url,
            headers={**headers, "Last-Event-ID": str(turn["lastEventId"])},
            timeout=30,
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for event in _frames(response.iter_lines()):
                before.append(event)
                if event["type"] == "slot.pushed":
                    break
        slot_id = before[-1]["payload"]["slot_id"]
        glove.answer_slot(session_id, slot_id, {"confirmed": True})
        # The client resumes from the last id it saw, with the client's automatic resume.
        after = list(glove.stream(session_id, since=before[-1]["id"], until_turn=turn["turnId"]))
        # Everything the log holds for the turn, read again from the start.
        everything = list(
            glove.stream(session_id, since=turn["lastEventId"], until_turn=turn["turnId"])
        )
        stored = [event for event in everything if event.id is not None]
        seen = [e["id"] for e in before if e["id"] is not None]
        seen += [e.id for e in after if e.id is not None]
        assert seen == [event.id for event in stored], (
            [(e["id"], e["type"]) for e in before],
            [(e.id, e.type) for e in after],
            [(e.id, e.type) for e in stored],
        )
        assert seen == sorted(set(seen))
        assert stored[-1].type == "turn.finished"
        assert orders_of(shop, session_id) == 1


def _frames(lines):
    import json

    data = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield json.loads("\n".join(data))
            data = []


def test_the_async_client_starts_and_streams_a_turn(shop, customer_token):
    async def scenario() -> tuple[list[StreamEvent], dict, dict]:
        async with AsyncAgentClient(shop.url, token=customer_token) as glove:
            session_id = await glove.create_session(agent="coffee")
            turn = await glove.start_turn(session_id, "hello", idempotency_key="async-hello")
            again = await glove.start_turn(session_id, "hello", idempotency_key="async-hello")
            events = [
                event
                async for event in glove.stream(
                    session_id, since=turn["lastEventId"], until_turn=turn["turnId"]
                )
            ]
            return events, turn, again

    events, turn, again = asyncio.run(scenario())
    assert again["turnId"] == turn["turnId"]
    assert events[0].type == "turn.queued"
    assert events[-1].type == "turn.finished" and "offline demo model" in events[-1].payload["text"]
    turn_events = [event for event in events if event.type.startswith("turn.")]
    assert {event.payload["turn"] for event in turn_events} == {turn["turnId"]}


def test_the_served_stream_refuses_outsiders_as_missing(shop, customer_token):
    """The stream this project serves (an ASGI app beside Django) keeps the API's rules."""
    outsider = shop.token_for("api-outsider")
    with AgentClient(shop.url, token=customer_token) as glove:
        session_id = glove.create_session(agent="coffee")
    url = f"{shop.url}/api/sessions/{session_id}/events"
    missing = f"{shop.url}/api/sessions/glove_nobody/events"

    def get(address: str, **headers: str) -> httpx.Response:
        return httpx.get(address, headers=headers, timeout=30)

    theirs = get(url, Authorization=f"Token {outsider}")
    nobody = get(missing, Authorization=f"Token {outsider}")
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json() == nobody.json() == {"error": "Session not found.", "field": None}
    assert get(url).status_code == 401
    assert get(url, Authorization="Token wrong").status_code == 401
    bad = get(url, Authorization=f"Token {customer_token}", **{"Last-Event-ID": "x"})
    assert bad.status_code == 400 and bad.json()["field"] == "Last-Event-ID"
    posted = httpx.post(url, headers={"Authorization": f"Token {customer_token}"}, timeout=30)
    assert posted.status_code == 405 and posted.headers["Allow"] == "GET"
