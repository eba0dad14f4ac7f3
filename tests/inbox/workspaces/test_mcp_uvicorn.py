"""Under a server that sends the ASGI lifespan, the MCP session manager starts with it; with
the lifespan off (Daphne has none; `make serve-prod` turns uvicorn's off) it starts on the
first MCP request. Both serve inbox_push."""

from __future__ import annotations

import pytest

from tests.api.liveserver import LiveServer
from tests.inbox.workspaces.conftest import make_workspace
from tests.inbox.workspaces.test_mcp import call, result_json

pytestmark = pytest.mark.timeout(120)


class LifespanUvicorn(LiveServer):
    def _command(self) -> list[str]:
        command = super()._command()
        command[command.index("--lifespan") + 1] = "on"
        command.remove("--no-access-log")
        return command


async def push_once(server: LiveServer, root) -> None:
    (root / "notes.md").write_text("notes")
    workspace = make_workspace(server, root, "ann", server.token_for("ann"))
    pushed = result_json(await call(workspace, "inbox_push", {"docs": [{"path": "notes.md"}]}))
    assert pushed["ok"] is True


@pytest.mark.process
async def test_it_starts_the_session_manager_from_the_lifespan_under_uvicorn(tmp_path):
    with LifespanUvicorn(server="uvicorn", extra_env={"LOG_LEVEL": "INFO"}) as server:
        await push_once(server, tmp_path)
        log = server.log_tail()
    # Started by the lifespan, before the first MCP request came in.
    assert log.index("StreamableHTTP session manager started") < log.index("POST /mcp/")
    assert "Application startup complete" in log


@pytest.mark.process
async def test_it_starts_the_session_manager_on_first_use_with_the_lifespan_off(tmp_path):
    with LiveServer(server="uvicorn") as server:
        await push_once(server, tmp_path)


@pytest.mark.process
async def test_any_server_process_answers_any_call_of_a_client(tmp_path):
    import httpx

    (tmp_path / "notes.md").write_text("notes")
    with LiveServer() as first, LiveServer(sharing=first) as second:
        workspace = make_workspace(first, tmp_path, "ann", first.token_for("ann"))
        # The client initialises with the first process; its next call reaches the second.
        result_json(await call(workspace, "inbox_read", {}))
        headers = {
            "Authorization": f"Bearer {workspace.token}",
            "Accept": "application/json, text/event-stream",
        }
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "inbox_push", "arguments": {"docs": [{"path": "notes.md"}]}},
        }
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            answer = await http.post(f"{second.url}/mcp/{workspace.id}", json=body)
        assert answer.status_code == 200
        assert answer.json()["result"]["isError"] is False
        read = result_json(await call(workspace, "inbox_read", {}))
        assert [e["docs"] for e in read["entries"]] == [[{"path": "notes.md"}]]
