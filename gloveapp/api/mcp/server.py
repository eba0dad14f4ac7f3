"""`/mcp/<workspace_id>`: the workspace's MCP server (official `mcp` SDK, streamable HTTP).

An edge. Each request is authenticated here, before the SDK sees it: an unknown workspace
and a missing or wrong bearer token get the same 401 (body and headers), so the answer does
not tell which workspace ids exist. The workspace found by the URL travels in the ASGI scope
to the tools, which never take it from their arguments, so an agent cannot push into another
workspace.

A POST's body is read here and held to the project's JSON rules before the SDK parses it
(left to itself, the SDK answered 500 to a body nested 10,000 deep or not UTF-8): at most
`DATA_UPLOAD_MAX_MEMORY_SIZE` bytes, UTF-8, JSON without NaN/Infinity, nested at most
`MAX_BODY_DEPTH` levels. Anything else is a JSON-RPC parse error: HTTP 400 with code -32700,
and no traceback.

The SDK's session manager runs in stateless JSON mode: every POST is a complete exchange, so
any of several server processes can answer any request, with nothing shared but the
database. It starts with the ASGI lifespan when the server sends one (uvicorn), or on the
first MCP request otherwise (Daphne has no lifespan), once per event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from contextlib import AsyncExitStack
from typing import Any

import mcp.types as types
from channels.db import database_sync_to_async
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from gloveapp.api.common.json_body import (
    BodyRefused,
    Disconnected,
    check_body,
    max_body_bytes,
    read_body,
    replaying,
)
from inbox.workspaces import selectors, services, tools
from inbox.workspaces.models import Workspace

logger = logging.getLogger(__name__)

PATH = re.compile(r"^/mcp/(?P<workspace_id>[A-Za-z0-9_-]{1,64})/?$")
SCOPE_KEY = "glove.workspace"
UNAUTHORIZED = {"error": "a valid bearer token for this workspace is required"}
UNAUTHORIZED_HEADERS = [(b"www-authenticate", b'Bearer realm="glove-workspace"')]
# A stand-in hashed when the workspace is unknown, so both refusals take the same work.
_NO_WORKSPACE = Workspace(token_hash="0" * 64)


def _parse_error(message: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": types.PARSE_ERROR, "message": f"Parse error: {message}"},
    }


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


def _ok(result: dict) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result))],
        structuredContent=result,
        isError=False,
    )


def build_server() -> Server:
    server: Server = Server(tools.SERVER_NAME)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(
                name="inbox_push",
                description=tools.INBOX_PUSH_DESCRIPTION,
                inputSchema=tools.INBOX_PUSH_SCHEMA,
            ),
            types.Tool(
                name="inbox_read",
                description=tools.INBOX_READ_DESCRIPTION,
                inputSchema=tools.INBOX_READ_SCHEMA,
            ),
            types.Tool(
                name="notify_user",
                description=tools.NOTIFY_USER_DESCRIPTION,
                inputSchema=tools.NOTIFY_USER_SCHEMA,
            ),
        ]

    # Our own validation, not the SDK's JSON-schema pass: its messages do not say which
    # field is wrong, ours do; extra arguments (a forged workspaceId) are ignored.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        request = server.request_context.request
        workspace: Workspace | None = request.scope.get(SCOPE_KEY) if request else None
        if workspace is None:  # only reachable if mounted without the endpoint below
            return _error("workspace: unknown")
        if not isinstance(arguments, dict):
            return _error("arguments: must be an object")
        handler = _HANDLERS.get(name)
        if handler is None:
            return _error(f"name: unknown tool {name!r}")
        try:
            return _ok(await database_sync_to_async(handler)(workspace, arguments))
        except (services.EntryInvalid, selectors.BadParameter) as exc:
            field = getattr(exc, "field", None) or getattr(exc, "name", "")
            problem = getattr(exc, "problem", None) or str(exc)
            return _error(f"{field}: {problem}" if field else problem)

    return server


def _inbox_push(workspace: Workspace, arguments: dict) -> dict:
    entry = services.entry_push(
        workspace=workspace, docs=arguments.get("docs"), comments=arguments.get("comments")
    )
    # A nudge in every push's answer: the user may have written back meanwhile.
    return {
        "ok": True,
        "entryId": str(entry.pk),
        "ts": entry.ts,
        "repliesWaiting": services.replies_waiting(workspace=workspace),
    }


def _inbox_read(workspace: Workspace, arguments: dict) -> dict:
    limit = selectors.parse_limit(arguments.get("limit"), default=20, maximum=100)
    entries, has_more = selectors.entries_page(
        owner_id=workspace.owner_id,
        limit=limit,
        before=arguments.get("before"),
        workspace_id=workspace.pk,
    )
    return {
        "entries": [services.entry_wire(e) for e in entries],
        "hasMore": has_more,
        # What the user wrote back since the last read: each reply is handed out once.
        "replies": services.replies_deliver(workspace=workspace),
    }


def _notify_user(workspace: Workspace, arguments: dict) -> dict:
    notification = services.notification_create(
        user=workspace.owner,
        text=arguments.get("text"),
        urgency=arguments.get("urgency", "info"),
        source="workspace",
        workspace=workspace,
    )
    return {"acknowledged": True, "id": notification.pk, "deprecated": "use inbox_push"}


_HANDLERS = {"inbox_push": _inbox_push, "inbox_read": _inbox_read, "notify_user": _notify_user}


def _find_workspace(workspace_id: str) -> Workspace | None:
    return Workspace.objects.select_related("owner").filter(pk=workspace_id).first()


def _bearer(scope: dict) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


async def _respond(send: Any, status: int, body: dict, headers: list | None = None) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class McpEndpoint:
    """The ASGI app for `/mcp/...` (and the lifespan): auth, then the SDK's manager."""

    def __init__(self) -> None:
        # One manager per event loop: a manager's task group belongs to the loop it runs on.
        self._running: dict[asyncio.AbstractEventLoop, StreamableHTTPSessionManager] = {}
        self._stacks: dict[asyncio.AbstractEventLoop, AsyncExitStack] = {}
        self._tasks: set[asyncio.Task] = set()
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    async def startup(self) -> None:
        loop = asyncio.get_running_loop()
        if loop in self._running:
            return
        manager = StreamableHTTPSessionManager(
            app=build_server(), json_response=True, stateless=True
        )
        stack = AsyncExitStack()
        await stack.enter_async_context(manager.run())
        self._stacks[loop] = stack
        self._running[loop] = manager

    async def shutdown(self) -> None:
        stack = self._stacks.pop(asyncio.get_running_loop(), None)
        self._running.pop(asyncio.get_running_loop(), None)
        if stack is not None:
            await stack.aclose()

    async def _manager(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        manager = self._running.get(loop)
        if manager is not None:
            return manager
        # No lifespan (Daphne): start on first use, in a task of its own that lives as long
        # as the loop, since the manager's task group must outlive this request.
        async with self._locks.setdefault(loop, asyncio.Lock()):
            if loop not in self._running:
                started = asyncio.Event()
                task = loop.create_task(self._run_forever(started), name="glove-mcp-manager")
                self._tasks.add(task)  # the loop keeps only weak references to tasks
                await started.wait()
        return self._running[loop]

    async def _run_forever(self, started: asyncio.Event) -> None:
        try:
            await self.startup()
        finally:
            started.set()
        await asyncio.Event().wait()  # until the loop stops

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        match = PATH.match(scope.get("path", ""))
        if match is None:
            await _respond(send, 404, {"error": "not_found"})
            return
        workspace = await database_sync_to_async(_find_workspace)(match["workspace_id"])
        # Unknown workspace or wrong token: one answer, after the same work.
        matches = services.workspace_token_matches(workspace or _NO_WORKSPACE, _bearer(scope))
        if workspace is None or not matches:
            await _respond(send, 401, UNAUTHORIZED, UNAUTHORIZED_HEADERS)
            return
        if scope.get("method") == "POST":
            try:
                body = await read_body(receive, max_body_bytes())
                check_body(body)
            except BodyRefused as refused:
                await _respond(send, 400, _parse_error(str(refused)))
                return
            except Disconnected:
                return
            receive = replaying(body, receive)
        manager = await self._manager()
        await manager.handle_request({**scope, SCOPE_KEY: workspace}, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:  # report it; the server decides what to do
                    logger.exception("MCP session manager failed to start")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


mcp_endpoint = McpEndpoint()


__all__ = ["McpEndpoint", "mcp_endpoint"]
