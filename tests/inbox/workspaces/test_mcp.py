"""inbox_push / inbox_read through the MCP SDK's own client, over streamable HTTP."""

from __future__ import annotations

import json

import httpx
import pytest
from asgiref.sync import sync_to_async

from inbox.models import Notification
from inbox.workspaces.tools import INBOX_PUSH_DESCRIPTION
from tests.inbox.workspaces.mcp_client import mcp_session

# One event loop for the module: the application's MCP session manager starts on the first
# request of a loop and lives as long as it.
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.postgres,
    pytest.mark.asyncio(loop_scope="module"),
]


async def call(workspace, tool: str, arguments: dict, *, token: str | None = None):
    async with mcp_session(
        workspace.mcp_url, token or workspace.token, transport=workspace.transport
    ) as session:
        return await session.call_tool(tool, arguments)


async def history(live, who: str, **params) -> httpx.Response:
    async with live["server"].client(
        headers={"Authorization": f"Token {live[who].owner_token}"}
    ) as http:
        return await http.get("/api/inbox/history", params=params)


def result_json(result) -> dict:
    assert not result.isError, result.content[0].text
    return json.loads(result.content[0].text)


async def test_it_lists_the_workspace_tools_with_the_seeds_guidance(live):
    workspace = live["ann"]
    async with mcp_session(workspace.mcp_url, workspace.token, workspace.transport) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == {"inbox_push", "inbox_read", "notify_user"}
    assert listed["inbox_push"].description == INBOX_PUSH_DESCRIPTION
    assert "Internal tool calls, intermediate scratch" in listed["inbox_push"].description
    assert listed["notify_user"].description.startswith("[DEPRECATED")
    assert "workspaceId" not in json.dumps(listed["inbox_push"].inputSchema)


async def test_it_stores_a_good_push_and_shows_it_in_the_owners_history(live):
    pushed = result_json(
        await call(
            live["ann"],
            "inbox_push",
            {"docs": [{"path": "research/report.md"}], "comments": "Drafted the *FOMC* piece."},
        )
    )
    assert pushed["ok"] is True
    body = (await history(live, "ann")).json()
    entry = next(e for e in body["entries"] if e["id"] == pushed["entryId"])
    assert entry["workspaceId"] == live["ann"].id
    assert entry["workspaceLabel"] == "ann's research"
    assert entry["docs"] == [{"path": "research/report.md"}]
    assert entry["comments"] == "Drafted the *FOMC* piece."
    assert entry["ts"] == pushed["ts"]
    assert entry["readAt"] is None


async def test_it_takes_the_workspace_from_the_url_never_from_arguments(live):
    pushed = result_json(
        await call(live["ann"], "inbox_push", {"comments": "hi", "workspaceId": live["bob"].id})
    )
    ids = [e["id"] for e in (await history(live, "ann")).json()["entries"]]
    assert pushed["entryId"] in ids
    assert pushed["entryId"] not in [
        e["id"] for e in (await history(live, "bob")).json()["entries"]
    ]


async def test_it_reads_back_only_this_workspaces_entries(live):
    earlier = result_json(await call(live["ann"], "inbox_push", {"comments": "ann's first"}))
    result_json(await call(live["bob"], "inbox_push", {"comments": "bob's check-in"}))
    mine = result_json(await call(live["ann"], "inbox_push", {"comments": "ann's latest"}))
    read = result_json(await call(live["ann"], "inbox_read", {"limit": 1}))
    assert [e["id"] for e in read["entries"]] == [mine["entryId"]]
    assert read["hasMore"] is True
    older = result_json(await call(live["ann"], "inbox_read", {"before": mine["entryId"]}))
    assert all(e["workspaceId"] == live["ann"].id for e in older["entries"])
    assert [e["id"] for e in older["entries"]] == [earlier["entryId"]]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "docs: at least one of docs or comments must be present"),
        ({"docs": [], "comments": "   "}, "docs: at least one of docs or comments"),
        ({"docs": [{"path": ""}]}, "docs[0].path: each doc must have a non-empty `path` string"),
        ({"docs": "report.md"}, "docs: must be an array"),
        ({"comments": 5}, "comments: must be a Markdown string"),
        ({"docs": [{"path": "../outside/secret.txt"}]}, "docs[0].path: refused to escape"),
        ({"docs": [{"path": "research/../../x"}]}, "docs[0].path: refused to escape"),
        ({"docs": [{"path": "/etc/passwd"}]}, "docs[0].path: must be relative"),
        ({"docs": [{"path": "escape.txt"}]}, "docs[0].path: refused to escape"),
        ({"docs": [{"path": "%2e%2e/outside/secret.txt"}]}, "docs[0].path: must not be URL-enc"),
        ({"docs": [{"path": "notes.txt\x00.md"}]}, "docs[0].path: must not contain NUL"),
        ({"docs": [{"path": "missing.md"}]}, "docs[0].path: no such file in the workspace"),
        ({"docs": [{"path": "research"}]}, "docs[0].path: no such file"),
        ({"docs": [{"path": "notes.txt"}] * 21}, "docs: at most 20 documents"),
        ({"comments": "x" * 20_001}, "comments: at most 20000 characters"),
    ],
)
async def test_it_refuses_a_bad_push_naming_the_field_and_stores_nothing(live, arguments, message):
    before = (await history(live, "ann")).json()["entries"]
    result = await call(live["ann"], "inbox_push", arguments)
    assert result.isError
    assert result.content[0].text.startswith(message)
    assert (await history(live, "ann")).json()["entries"] == before


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # A Latin-1 file name that exists in the workspace (the OS would open it).
        ({"docs": [{"path": "a\udc80.md"}]}, "docs[0].path: must not contain lone surrogate"),
        ({"docs": [{"path": "../\ud800"}]}, "docs[0].path: must not contain lone surrogate"),
        ({"comments": "ready \ud800"}, "comments: must not contain lone surrogate"),
    ],
)
async def test_it_refuses_text_no_page_can_show_and_keeps_the_inbox_readable(
    live, arguments, message
):
    # The SDK's client cannot even encode a lone surrogate: send the JSON-RPC call as the
    # escaped JSON text a careless client writes.
    workspace = live["ann"]
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "inbox_push", "arguments": arguments},
        }
    )
    async with live["server"].client() as http:
        response = await http.post(
            workspace.mcp_url,
            content=body,
            headers={
                "Authorization": f"Bearer {workspace.token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
        )

    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(message)
    assert (await history(live, "ann")).status_code == 200


async def test_it_accepts_a_symlink_that_stays_inside_the_workspace(live):
    pushed = result_json(
        await call(live["ann"], "inbox_push", {"docs": [{"path": "inside-link.txt"}]})
    )
    assert pushed["ok"]


async def test_it_refuses_a_wrong_or_missing_token_with_401(live):
    ann = live["ann"]
    with pytest.raises(Exception):  # noqa: B017 - the SDK client raises on the 401
        await call(ann, "inbox_push", {"comments": "forged"}, token=live["bob"].token)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Token {ann.token}"}):
        async with live["server"].client() as http:
            response = await http.post(ann.mcp_url, json=initialize, headers={**accept, **headers})
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


async def test_it_refuses_an_unknown_workspace_as_it_refuses_a_wrong_token(live):
    server = live["server"]
    async with server.client() as http:
        response = await http.post(
            f"{server.url}/mcp/ws-doesnotexist",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {live['ann'].token}"},
        )
    assert response.status_code == 401  # the same answer as a wrong token (issue 22)
    with pytest.raises(Exception):  # noqa: B017
        await call(
            type(live["ann"])(
                id="x",
                token=live["ann"].token,
                root=live["ann"].root,
                mcp_url=f"{server.url}/mcp/ws-doesnotexist",
                owner_token="",
                transport=server.transport,
            ),
            "inbox_push",
            {"comments": "hello?"},
        )


async def test_it_records_a_deprecated_notify_user_as_a_legacy_notification(live):
    result = result_json(await call(live["ann"], "notify_user", {"text": "cron finished"}))
    assert result["acknowledged"] is True
    stored = await sync_to_async(
        lambda: [(n.text, n.source) for n in Notification.objects.filter(user__username="ann")]
    )()
    assert ("cron finished", "workspace") in stored


async def test_a_rotated_token_replaces_the_old_one(live):
    server = live["server"]
    ann = live["bob"]
    output = server.manage("rotate_workspace_token", ann.id)
    new_token = output.split("token:")[1].split()[0]
    with pytest.raises(Exception):  # noqa: B017
        await call(ann, "inbox_push", {"comments": "old token"})
    assert result_json(await call(ann, "inbox_push", {"comments": "new"}, token=new_token))["ok"]
    ann.token = new_token


async def test_the_tool_descriptions_tell_the_agent_to_check_for_replies(live):
    ann = live["ann"]
    async with mcp_session(ann.mcp_url, ann.token, ann.transport) as session:
        listed = {tool.name: tool.description for tool in (await session.list_tools()).tools}
    assert "check it for replies" in listed["inbox_push"]
    assert "Check for the user's replies" in listed["inbox_read"]
    pushed = result_json(await call(live["ann"], "inbox_push", {"comments": "Any news?"}))
    assert pushed["repliesWaiting"] == 0
