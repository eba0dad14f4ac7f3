"""Issue 22, the MCP edge: the bodies that made the SDK answer 500 (nested 10,000 deep,
50,000 nested objects, bytes that are not UTF-8) are JSON-RPC parse errors (400, -32700)
with no traceback; an unknown workspace is answered exactly as a wrong token."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.inbox.workspaces.test_mcp import call, result_json

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.postgres,
    pytest.mark.asyncio(loop_scope="module"),
]

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HOSTILE_BODIES = {
    "nested 10,000 deep": b"[" * 10_000 + b"]" * 10_000,
    "50,000 nested objects": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "not UTF-8": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list\xff\xfe"}',
    "a NaN": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": NaN}}',
    "not JSON": b"{this is not json",
    "empty": b"",
}


def _bearer(token: str) -> dict:
    return {**ACCEPT, "Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("name", list(HOSTILE_BODIES))
async def test_a_hostile_body_is_a_json_rpc_parse_error_not_a_500(live, name):
    ann = live["ann"]
    async with live["server"].client() as http:
        response = await http.post(
            ann.mcp_url, content=HOSTILE_BODIES[name], headers=_bearer(ann.token)
        )
    assert response.status_code == 400, response.text[:300]
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32700
    assert body["error"]["message"].startswith("Parse error: ")
    assert "Traceback" not in live["server"].log_tail(200_000)


@pytest.mark.parametrize("text", ["\\u0000", "\\ud800"])
async def test_a_nul_or_lone_surrogate_is_no_server_error_either(live, text):
    ann = live["ann"]
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "inbox_push", '
        f'"arguments": {{"comments": "x{text}"}}}}}}'
    )
    method = f'{{"jsonrpc": "2.0", "id": 2, "method": "tools/list{text}"}}'
    async with live["server"].client() as http:
        for content in (body, method):
            response = await http.post(ann.mcp_url, content=content, headers=_bearer(ann.token))
            assert response.status_code < 500, response.text[:300]


async def test_a_body_over_the_size_limit_is_refused_the_same_way(live):
    ann = live["ann"]
    huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"p": "a" * 3_000_000}})
    async with live["server"].client() as http:
        response = await http.post(ann.mcp_url, content=huge, headers=_bearer(ann.token))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


async def test_an_unknown_workspace_and_a_wrong_token_get_the_same_401(live):
    server, ann = live["server"], live["ann"]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with live["server"].client() as http:
        unknown = await http.post(
            f"{server.url}/mcp/ws-doesnotexist", json=initialize, headers=_bearer(ann.token)
        )
        wrong = await http.post(ann.mcp_url, json=initialize, headers=_bearer("not-the-token"))
        missing = await http.post(f"{server.url}/mcp/ws-doesnotexist", json=initialize)

    def shape(response: httpx.Response) -> tuple:
        headers = {k: v for k, v in response.headers.items() if k.lower() != "date"}
        return response.status_code, headers, response.content

    assert shape(unknown) == shape(wrong) == shape(missing)
    assert unknown.status_code == 401
    assert unknown.headers["www-authenticate"].startswith("Bearer")


async def test_good_calls_still_reach_the_sdk_after_the_edges_checks(live):
    pushed = result_json(await call(live["ann"], "inbox_push", {"comments": "still fine"}))
    assert pushed["ok"] is True
