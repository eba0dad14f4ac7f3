"""Under a server that sends the ASGI lifespan (uvicorn), the MCP session manager starts
with it (Daphne, which sends none, starts it on the first MCP request: test_mcp.py)."""

from __future__ import annotations

import pytest

from tests.api.liveserver import LiveServer
from tests.workspaces.conftest import make_workspace
from tests.workspaces.test_mcp import call, result_json

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def uvicorn_server():
    with LiveServer(server="uvicorn", extra_env={"LOG_LEVEL": "INFO"}) as server:
        yield server


async def test_it_serves_inbox_push_under_uvicorn_with_the_lifespan(uvicorn_server, tmp_path):
    (tmp_path / "notes.md").write_text("notes")
    owner_token = uvicorn_server.token_for("ann")
    workspace = make_workspace(uvicorn_server, tmp_path, "ann", owner_token)
    pushed = result_json(await call(workspace, "inbox_push", {"docs": [{"path": "notes.md"}]}))
    assert pushed["ok"] is True
    log = uvicorn_server.log_tail()
    # Started by the lifespan, before the first MCP request came in.
    assert log.index("StreamableHTTP session manager started") < log.index("POST /mcp/")
    assert "Application startup complete" in log
