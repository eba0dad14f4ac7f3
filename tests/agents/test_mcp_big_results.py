"""A real MCP server answering with 20 MB (text, then structured content): the model reads
a bounded head with a notice, the stored row and the page stay small, and the owner (or
staff) downloads the whole; nobody else can."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.conversations.models import KeptToolResult, Message
from gloveapp.conversations.services import session_create
from gloveapp.core.mcp import TOOL_LISTS
from gloveapp.core.providers.registry import register_model_provider, unregister_model_provider
from gloveapp.core.providers.scripted import ScriptedModel
from tests.agents.conftest import say
from tests.core.support import calls
from tests.mcp_servers import big_result_server

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("worker"),
    pytest.mark.timeout(180),
]

CAP = 64 * 1024
TWENTY_MB = 20 * 1024 * 1024


@pytest.fixture
def model_calls() -> Iterator[list]:
    """What the model of the "big" agent sees on each call, and its script."""
    replies: list = []
    seen: list = []

    class Recording(ScriptedModel):
        async def prompt(self, messages, *args, **kwargs):
            seen.append([m.to_dict() for m in messages])
            return await super().prompt(messages, *args, **kwargs)

    def factory(model_name: str = "", **kwargs) -> ScriptedModel:
        taken = list(replies)
        replies.clear()
        return Recording(taken, label="big")

    register_model_provider("ext-big", factory, replace=True)
    TOOL_LISTS.invalidate()
    yield replies, seen
    unregister_model_provider("ext-big")
    TOOL_LISTS.invalidate()


@pytest.fixture(scope="module")
def big_server() -> Iterator[dict]:
    with big_result_server() as entry:
        yield entry


@pytest.fixture
def owner(transactional_db, settings, big_server):
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "big": {
            "factory": "tests.agents.factories.plain_agent",
            "model": "ext-big",
            "mcp_servers": [big_server],
        },
    }
    return get_user_model().objects.create_user("big-owner", password="pw-big-owner-1")


@pytest.fixture
def session_id(owner) -> str:
    return session_create(owner=owner, agent_name="big", title="Big").pk


def stored_results(session_id: str) -> list[tuple[dict, int]]:
    """Each tool result with the size of its stored message's results (bytes of JSON)."""
    rows = Message.objects.filter(session_id=session_id, tool_results__isnull=False)
    return [
        (result["result"], len(json.dumps(row.tool_results).encode()))
        for row in rows.order_by("seq")
        for result in row.tool_results
    ]


@pytest.mark.process
@pytest.mark.parametrize("tool", ["big__big_text", "big__big_structured"])
async def test_a_20_mb_result_is_cut_for_the_model_the_row_and_the_page(
    session_id, owner, model_calls, tool
):
    replies, seen = model_calls
    replies += [calls((tool, {"megabytes": 20})), "That was a lot."]

    await say(session_id, "Fetch the big thing")

    [(result, row_bytes)] = await sync_to_async(stored_results)(session_id)
    assert result["status"] == "success", (result.get("message"), str(result.get("data"))[:300])
    assert row_bytes < 2 * CAP
    assert "[Result truncated: the tool returned" in result["data"]
    assert result["truncated"]["bytes"] > TWENTY_MB
    # The model's second call read the bounded result, not 20 MB.
    assert len(json.dumps(seen[-1])) < 4 * CAP

    client = Client()
    await sync_to_async(client.force_login)(owner)
    page = await sync_to_async(client.get)(f"/sessions/{session_id}/")
    assert page.status_code == 200
    assert len(page.content) < 1024 * 1024
    assert "Download the whole result" in page.content.decode()

    kept = await KeptToolResult.objects.aget(session_id=session_id)
    download = await sync_to_async(client.get)(
        f"/sessions/{session_id}/tool-results/{kept.call_id}"
    )
    assert download.status_code == 200
    whole = json.loads(b"".join(download.streaming_content))
    assert whole["status"] == "success"
    assert len(json.dumps(whole)) > TWENTY_MB
    assert kept.size > TWENTY_MB and len(gzip.decompress(kept.content)) == kept.size


@pytest.mark.process
async def test_only_the_owner_and_staff_download_the_whole(session_id, owner, model_calls):
    replies, _ = model_calls
    replies += [calls(("big__big_text", {"megabytes": 1})), "Done."]
    await say(session_id, "Fetch")
    kept = await KeptToolResult.objects.aget(session_id=session_id)
    url = f"/sessions/{session_id}/tool-results/{kept.call_id}"

    User = get_user_model()
    outsider = await sync_to_async(User.objects.create_user)("outsider", password="pw-out-1")
    staff = await sync_to_async(User.objects.create_user)(
        "staffer", password="pw-staff-1", is_staff=True
    )
    answers = {}
    for name, user in (("outsider", outsider), ("staff", staff)):
        client = Client()
        await sync_to_async(client.force_login)(user)
        answers[name] = (await sync_to_async(client.get)(url)).status_code
    anonymous = await sync_to_async(Client().get)(url)

    assert answers == {"outsider": 404, "staff": 200}
    assert anonymous.status_code == 302  # to the login page
