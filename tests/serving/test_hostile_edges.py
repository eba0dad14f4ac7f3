"""Issue 22: the hostile sweep that found 0 x 5xx on the REST routes, rerun over the MCP
edge and the websocket routes, on a real server. Websocket upgrades to unrouted paths once
answered 500 with a traceback, unauthenticated, on Daphne and uvicorn; they are refused at
the handshake now. Kept cheap: one server per kind, a few hundred requests."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import secrets
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.api.liveserver import LiveServer
from tests.inbox.workspaces.conftest import parse_created

pytestmark = [pytest.mark.timeout(300)]

PASSWORD = "pw-mallory-123456"
UNROUTED = [
    "/ws/nothing",
    "/ws/sessions/x/y/z/",
    "/ws/",
    "/",
    "/ws/sessions/",
    "/ws/sessions/x",  # no trailing slash
    "/ws/workspaces/",
    "/ws/approvals/extra/",
    "/ws/sessions/%00/x/",
    "/ws/" + "a" * 4000,
    "/ws/sessions/\u00e9\u00e9/deeper/",
    "/mcp/ws-x",
    "/admin/",
]


@pytest.fixture(scope="module")
def daphne(tmp_path_factory) -> Iterator[dict]:
    yield from _server("daphne", tmp_path_factory)


@pytest.fixture(scope="module")
def uvicorn(tmp_path_factory) -> Iterator[dict]:
    yield from _server("uvicorn", tmp_path_factory)


def _server(kind: str, tmp_path_factory) -> Iterator[dict]:
    with LiveServer(server=kind) as live:
        live.add_user("mallory", PASSWORD)
        token = live.token_for("mallory")
        root = tmp_path_factory.mktemp("mallory")
        (root / "note.md").write_text("# note\n")
        workspace_id, workspace_token = parse_created(
            live.manage(
                "create_workspace", "--label", "m", "--root", str(root), "--owner", "mallory"
            )
        )
        with httpx.Client(base_url=live.url, timeout=30) as http:
            page = http.get("/accounts/login/")
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
            http.post(
                "/accounts/login/",
                data={"username": "mallory", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
                headers={"Referer": f"{live.url}/accounts/login/"},
            )
            cookie = f"sessionid={http.cookies['sessionid']}"
            session = http.post(
                "/api/sessions", json={}, headers={"Authorization": f"Token {token}"}
            ).json()
        yield {
            "live": live,
            "cookie": cookie,
            "session": session["sessionId"],
            "workspace": workspace_id,
            "workspace_token": workspace_token,
        }


def _ws_url(live: LiveServer, path: str) -> str:
    return live.url.replace("http://", "ws://") + path


def _no_traceback(live: LiveServer) -> None:
    log = live.log_tail(2_000_000)
    assert "Traceback" not in log, log[-4000:]


async def _handshake(live: LiveServer, path: str, cookie: str = "") -> int:
    """The status of a refused handshake, or 101 if the socket opened."""
    headers = {"Origin": live.url, **({"Cookie": cookie} if cookie else {})}
    try:
        async with connect(_ws_url(live, path), additional_headers=headers, open_timeout=30):
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


@pytest.mark.process
@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
async def test_unrouted_and_malformed_websocket_paths_are_refused_at_the_handshake(request, kind):
    server = request.getfixturevalue(kind)
    live = server["live"]
    for path, cookie in itertools.product(UNROUTED, ["", server["cookie"]]):
        status = await _handshake(live, path, cookie)
        assert status in (403, 404), (path, status)
    # A routed path still opens (its consumer then decides).
    assert await _handshake(live, "/ws/approvals/", server["cookie"]) == 101
    _no_traceback(live)


HOSTILE_FRAMES = [
    "not json",
    "{}",
    '{"type": 1}',
    "[" * 10_000 + "]" * 10_000,
    '{"type": "answer", "slot": "\\ud800", "value": NaN}',
    "\x00" * 100,
    "x" * 500_000,
    b"\xff\xfe\x00binary",
]
QUERIES = [
    "",
    "?last_event_id=abc",
    "?last_event_id=-5",
    "?last_event_id=" + "9" * 30,
    "?last_event_id=" + "9" * 5000,
    "?%ff=%ff",
]


async def _sweep_socket(live: LiveServer, path: str, cookie: str) -> None:
    headers = {"Origin": live.url, "Cookie": cookie}
    try:
        async with connect(
            _ws_url(live, path), additional_headers=headers, open_timeout=30, max_size=None
        ) as socket:
            for frame in HOSTILE_FRAMES:
                await socket.send(frame)
            await asyncio.sleep(0.05)
            await socket.close()
        code = socket.close_code
    except InvalidStatus as refused:
        assert refused.response.status_code < 500, path
        return
    except ConnectionClosed as closed:
        code = closed.rcvd.code if closed.rcvd else None
    assert code != 1011, path  # 1011: the server's internal error


@pytest.mark.process
async def test_the_websocket_routes_survive_the_hostile_sweep(daphne):
    server = daphne
    live, cookie = server["live"], server["cookie"]
    paths = [
        f"/ws/sessions/{server['session']}/",
        "/ws/sessions/not-mine/",
        f"/ws/workspaces/{server['workspace']}/",
        "/ws/workspaces/ws-unknown/",
        "/ws/approvals/",
    ]
    for path, query in itertools.product(paths, QUERIES):
        await _sweep_socket(live, path + query, cookie)
        await _sweep_socket(live, path + query, "sessionid=forged")
    _no_traceback(live)


def _mcp_bodies() -> Iterator[bytes]:
    hostile_values = [
        None,
        True,
        -1,
        0,
        10**30,
        1.5,
        "",
        "x" * 100_000,
        "\\u0000",
        "../../etc/passwd",
        [],
        {},
        [[[[[[1]]]]]],
        {"path": "../x"},
        [{"path": "/etc/passwd"}],
        [{"path": 5}],
        [{"path": "note.md/"}],
        [{"path": "./note.md"}],
        [{"path": "note.md"}] * 50,
    ]
    fields = {
        "inbox_push": ("docs", "comments"),
        "inbox_read": ("limit", "before"),
        "notify_user": ("text", "urgency"),
        "nope": ("path",),
    }
    for tool, names in fields.items():
        for field, value in itertools.product(names, hostile_values):
            params = {"name": tool, "arguments": {field: value}}
            yield (
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
                .replace('"\\\\u0000"', '"\\u0000"')
                .encode()
            )
    for body in (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "inbox_push", "arguments": "not a dict"},
        },
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": None},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": 5}},
        {"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"},
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}] * 3,
        [],
        "just a string",
        12,
    ):
        yield json.dumps(body).encode()
    yield b"[" * 100_000 + b"]" * 100_000
    yield b'{"a":' * 50_000 + b"1" + b"}" * 50_000
    yield b"\xff\xfe{}"
    yield b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": Infinity}}'


@pytest.mark.process
async def test_the_mcp_edge_survives_the_hostile_sweep(daphne):
    server = daphne
    live = server["live"]
    url = f"{live.url}/mcp/{server['workspace']}"
    good = {
        "Authorization": f"Bearer {server['workspace_token']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    header_variants = [
        good,
        {**good, "Content-Type": "text/plain"},
        {**good, "Accept": "text/html"},
        {**good, "Authorization": "Bearer " + "x" * 10_000},
        {**good, "Authorization": "Basic Zm9vOmJhcg=="},
        {k: v for k, v in good.items() if k != "Authorization"},
    ]
    statuses: list[int] = []
    async with httpx.AsyncClient(timeout=60) as http:
        for body in _mcp_bodies():
            statuses.append((await http.post(url, content=body, headers=good)).status_code)
        for headers in header_variants:
            for method in ("GET", "DELETE", "PUT", "PATCH", "OPTIONS", "POST"):
                try:
                    response = await http.request(
                        method, url, content=b"{}", headers=headers, timeout=3
                    )
                except httpx.ReadTimeout:
                    assert method == "GET"  # the SDK's event stream, held open: no error
                    continue
                statuses.append(response.status_code)
        for path in ("/mcp/", "/mcp/x/y", "/mcp/" + "a" * 100, f"/mcp/{secrets.token_hex(4)}"):
            statuses.append(
                (await http.post(live.url + path, content=b"{}", headers=good)).status_code
            )
    assert [status for status in statuses if status >= 500] == []
    assert len(statuses) > 150
    _no_traceback(live)
