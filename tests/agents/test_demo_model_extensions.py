"""The offline demo model uses what docs/howto/agents.md adds to an agent, so a newcomer
sees each extension at work without an API key: an MCP server's tool (mcp-server-time over
stdio, named by its bare command as the guide writes it), a subagent (`@roaster ...`) and a
skill ("use the brew-guide skill")."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import sync_to_async

from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.core.mcp import TOOL_LISTS
from tests.agents.conftest import last_reply, say

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("worker"),
    pytest.mark.timeout(120),
]


@pytest.fixture
def session_id(settings, monkeypatch, transactional_db) -> str:
    from django.contrib.auth import get_user_model

    # The worker as `make run` starts it: the virtualenv's bin/ is not on its PATH.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "brew": {
            "factory": "gloveapp.demo.coffee.build_agent",
            "model": "demo",
            "mcp_servers": [{"name": "time", "command": "mcp-server-time"}],
            "subagents": [{"name": "roaster", "agent": "roastery", "description": "Roasts"}],
            "skills": [
                {
                    "name": "brew-guide",
                    "content": "Grind medium-fine, 1:16.",
                    "description": "How to brew",
                    "expose_to_agent": True,
                }
            ],
        },
    }
    TOOL_LISTS.invalidate()
    owner = get_user_model().objects.create_user("newcomer", password="pw-newcomer-1")
    yield session_create(owner=owner, agent_name="brew", title="Brew").pk
    TOOL_LISTS.invalidate()


def _results(session_id: str) -> list[dict]:
    rows = Message.objects.filter(session_id=session_id, tool_results__isnull=False).order_by("seq")
    return [result for row in rows for result in row.tool_results]


async def results(session_id: str) -> list[dict]:
    return await sync_to_async(_results)(session_id)


@pytest.mark.process
async def test_it_asks_the_time_server_by_its_bare_command(session_id):
    await say(session_id, "time: what time is it in Tokyo?")

    [result] = await results(session_id)
    assert result["tool_name"] == "time__get_current_time"
    assert result["result"]["status"] == "success", result
    assert json.loads(result["result"]["data"])["timezone"] == "Asia/Tokyo"
    reply = await last_reply(session_id)
    # In words a customer reads: no JSON, no ISO timestamp.
    assert "The time server answered (get current time): timezone Asia/Tokyo" in reply
    assert "{" not in reply and not re.search(r"\d{4}-\d{2}-\d{2}T", reply), reply


async def test_it_delegates_to_a_subagent_when_the_user_mentions_it(session_id):
    await say(session_id, "@roaster what do you have on the shelf?")

    [result] = await results(session_id)
    assert result["tool_name"] == "glove_invoke_subagent"
    assert result["result"]["status"] == "success", result
    assert (await last_reply(session_id)).startswith("The roaster subagent says: ")


async def test_it_uses_a_skill_when_asked(session_id):
    await say(session_id, "use the brew-guide skill please")

    [result] = await results(session_id)
    assert result["tool_name"] == "glove_invoke_skill"
    assert "From the brew-guide skill: Grind medium-fine, 1:16." in await last_reply(session_id)
