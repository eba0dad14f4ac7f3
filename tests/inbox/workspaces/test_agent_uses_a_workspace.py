"""An agent whose MCP server needs a header: the workspace inbox's endpoint, reached over HTTP
with its bearer token read from the environment (`${NAME}` in the server's headers)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from gloveapp.core.mcp import McpToolbox, ToolListCache
from tests.api.liveserver import free_port
from tests.core.support import calls, make_glove

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def mcp_url(live) -> Iterator[str]:
    """ann's MCP endpoint over the network: the application served by uvicorn on a thread
    of this process (the toolbox's client speaks HTTP to its servers)."""
    from gloveapp.asgi import application

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="on", log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.01)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}/mcp/{live['ann'].id}"
    server.should_exit = True
    thread.join(timeout=30)


def workspace_server(mcp_url: str, variable: str) -> dict:
    return {
        "name": "ws",
        "url": mcp_url,
        "headers": {"Authorization": f"Bearer ${{{variable}}}"},
        "permission": "never",  # nobody here to answer a prompt
    }


async def test_it_sends_the_headers_with_the_token_from_the_environment(live, mcp_url, monkeypatch):
    monkeypatch.setenv("GLOVE_TEST_WORKSPACE_TOKEN", live["ann"].token)
    toolbox = McpToolbox(
        [workspace_server(mcp_url, "GLOVE_TEST_WORKSPACE_TOKEN")], cache=ToolListCache()
    )
    await toolbox.start()
    glove, _, store = make_glove([calls(("ws__inbox_read", {})), "Read."], tools=toolbox.tools)
    await glove.process_request("What is in my inbox?")
    await toolbox.close()

    result = (await store.get_messages())[2].tool_results[0].result
    assert result.status == "success"
    assert "entries" in json.loads(result.data)


async def test_it_leaves_out_a_server_that_refuses_the_token(mcp_url, monkeypatch):
    monkeypatch.setenv("GLOVE_TEST_WORKSPACE_TOKEN", "not-the-token")
    toolbox = McpToolbox(
        [workspace_server(mcp_url, "GLOVE_TEST_WORKSPACE_TOKEN")], cache=ToolListCache()
    )
    await toolbox.start()
    await toolbox.close()

    assert toolbox.tools == []
    assert [server.name for server in toolbox.unavailable] == ["ws"]
    assert "401" in toolbox.unavailable[0].reason
