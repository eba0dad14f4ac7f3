"""Agents configured with MCP servers in GLOVE_AGENTS, their turns run by the turn worker:
the scripted model calls real servers' tools (mcp-server-time over stdio,
server-everything over streamable HTTP) and reads their answers."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.core.mcp import TOOL_LISTS
from gloveapp.core.providers.registry import register_model_provider, unregister_model_provider
from gloveapp.core.providers.scripted import ScriptedModel
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from tests.agents.conftest import next_slot, say
from tests.conftest import service_missing
from tests.core.support import calls
from tests.mcp_servers import EverythingServer, everything_server, time_server

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("worker"),
    pytest.mark.timeout(120),
]

FACTORY = "tests.agents.factories.plain_agent"


@pytest.fixture
def script() -> Iterator[list]:
    """The model of the "clock" agent's turns: each turn takes the next replies from here."""
    replies: list = []

    def factory(model_name: str = "", **kwargs) -> ScriptedModel:
        taken = list(replies)
        replies.clear()
        return ScriptedModel(taken, label="clock")

    register_model_provider("ext-clock", factory, replace=True)
    TOOL_LISTS.invalidate()
    yield replies
    unregister_model_provider("ext-clock")
    TOOL_LISTS.invalidate()


@pytest.fixture
def everything() -> Iterator[EverythingServer]:
    if shutil.which("npm") is None:
        service_missing("node and npm are needed for @modelcontextprotocol/server-everything")
    with everything_server() as server:
        yield server


def configure(settings, *servers: dict) -> None:
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "clock": {"factory": FACTORY, "model": "ext-clock", "mcp_servers": list(servers)},
    }


@pytest.fixture
def owner(transactional_db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("mcp-owner", password="pw-mcp-owner-1")


@pytest.fixture
def session_id(owner) -> str:
    return session_create(owner=owner, agent_name="clock", title="Clock").pk


def _tool_results(session_id: str) -> list[dict]:
    rows = Message.objects.filter(session_id=session_id, tool_results__isnull=False).order_by("seq")
    return [result["result"] for row in rows for result in row.tool_results]


async def tool_results(session_id: str) -> list[dict]:
    return await sync_to_async(_tool_results)(session_id)


async def newest_turn(session_id: str) -> Turn:
    return await sync_to_async(Turn.objects.filter(session_id=session_id).latest)("id")


@pytest.mark.process
async def test_it_reads_the_real_time_from_the_stdio_server(settings, script, session_id):
    configure(settings, time_server())
    script += [calls(("time__get_current_time", {"timezone": "Europe/Paris"})), "It is late."]

    await say(session_id, "What time is it in Paris?")

    [result] = await tool_results(session_id)
    assert result["status"] == "success"
    assert json.loads(result["data"])["timezone"] == "Europe/Paris"
    assert (await newest_turn(session_id)).status == "done"


@pytest.mark.process
async def test_it_asks_before_an_mcp_tool_that_is_not_read_only(
    settings, script, session_id, everything
):
    configure(settings, everything.entry())
    script += [calls(("everything__toggle-simulated-logging", {})), "Toggled."]

    await turns.submit_message(session_id=session_id, text="Toggle the logging")
    slot = await next_slot(session_id)
    assert slot.renderer == "permission_request"
    assert slot.input["toolName"] == "everything__toggle-simulated-logging"
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="once")
    await turns.wait_until_idle(session_id)

    [result] = await tool_results(session_id)
    assert result["status"] == "success"
    assert "logging" in result["data"].lower()


@pytest.mark.process
async def test_it_uses_one_session_per_server_and_closes_it_at_the_turns_end(
    settings, script, session_id, everything
):
    configure(settings, everything.entry())
    script += [
        calls(("everything__echo", {"message": "one"})),
        calls(("everything__get-sum", {"a": 20, "b": 22})),
        "Done.",
    ]

    await say(session_id, "Echo, then add")

    results = await tool_results(session_id)
    assert [r["data"] for r in results] == ["Echo: one", "The sum of 20 and 22 is 42."]
    assert everything.sessions_started() == 1
    assert "Received session termination request" in everything.log()


@pytest.mark.process
async def test_it_says_on_the_page_that_a_server_is_down(settings, script, session_id, owner):
    configure(
        settings,
        time_server(),
        {"name": "weather", "url": "http://127.0.0.1:9/mcp", "connect_timeout": 5},
    )
    script += ["I can still tell the time."]

    await say(session_id, "Hello")

    turn = await newest_turn(session_id)
    assert turn.status == "done"
    assert turn.notice.startswith("The MCP server 'weather' is unavailable (")
    client = Client()
    await sync_to_async(client.force_login)(owner)
    page = await sync_to_async(client.get)(f"/sessions/{session_id}/")
    assert "The MCP server &#x27;weather&#x27; is unavailable" in page.content.decode()


@pytest.mark.process
async def test_it_gives_a_tool_error_when_the_server_dies_mid_turn(
    settings, script, session_id, everything
):
    configure(settings, everything.entry())

    def kill_then_call(_prompt):
        everything.kill()
        return calls(("everything__echo", {"message": "anyone?"}))

    script += [calls(("everything__echo", {"message": "first"})), kill_then_call, "It went away."]

    await say(session_id, "Echo twice")

    first, second = await tool_results(session_id)
    assert first["data"] == "Echo: first"
    assert second["status"] == "error" and second["message"]
    assert (await newest_turn(session_id)).status == "done"
