"""An agent whose MCP server needs a header: the workspace inbox's endpoint, reached with its
bearer token read from the environment (`${NAME}` in the server's headers)."""

from __future__ import annotations

import json

import pytest

from gloveapp.core.mcp import McpToolbox, ToolListCache
from tests.core.support import calls, make_glove

pytestmark = pytest.mark.timeout(120)


def workspace_server(live: dict, variable: str) -> dict:
    return {
        "name": "ws",
        "url": live["ann"].mcp_url,
        "headers": {"Authorization": f"Bearer ${{{variable}}}"},
        "permission": "never",  # nobody here to answer a prompt
    }


@pytest.mark.process
async def test_it_sends_the_headers_with_the_token_from_the_environment(live, monkeypatch):
    monkeypatch.setenv("GLOVE_TEST_WORKSPACE_TOKEN", live["ann"].token)
    toolbox = McpToolbox(
        [workspace_server(live, "GLOVE_TEST_WORKSPACE_TOKEN")], cache=ToolListCache()
    )
    await toolbox.start()
    glove, _, store = make_glove([calls(("ws__inbox_read", {})), "Read."], tools=toolbox.tools)
    await glove.process_request("What is in my inbox?")
    await toolbox.close()

    result = (await store.get_messages())[2].tool_results[0].result
    assert result.status == "success"
    assert "entries" in json.loads(result.data)


@pytest.mark.process
async def test_it_leaves_out_a_server_that_refuses_the_token(live, monkeypatch):
    monkeypatch.setenv("GLOVE_TEST_WORKSPACE_TOKEN", "not-the-token")
    toolbox = McpToolbox(
        [workspace_server(live, "GLOVE_TEST_WORKSPACE_TOKEN")], cache=ToolListCache()
    )
    await toolbox.start()
    await toolbox.close()

    assert toolbox.tools == []
    assert [server.name for server in toolbox.unavailable] == ["ws"]
    assert "401" in toolbox.unavailable[0].reason
