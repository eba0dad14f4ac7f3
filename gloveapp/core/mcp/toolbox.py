"""An agent's MCP servers for one turn: their tools, and one client session per server.

    toolbox = McpToolbox(servers, cache=TOOL_LISTS)
    await toolbox.start()            # tool lists (cached per server), down servers noted
    for tool in toolbox.tools: glove.fold(tool)
    ...                              # the turn: calls reuse one session per server
    await toolbox.close()            # every session closed at the turn's end

A server that cannot be reached leaves the agent without its tools (`toolbox.unavailable`
says which and why) rather than failing the turn. A session opened to list the tools is the
one the turn's calls use; a server whose list came from the cache is connected on its first
call. A session lost mid-turn (the server died) is opened again on the next call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gloveapp.core.mcp.bridge import bridge_mcp_tool
from gloveapp.core.mcp.config import McpServerConfig
from gloveapp.core.mcp.connection import (
    McpCallResult,
    McpConnection,
    McpToolDef,
    McpUnavailable,
    describe,
)
from gloveapp.core.tools import Tool

DEFAULT_TOOLS_TTL_SECONDS = 300.0


class ToolListCache:
    """Each server's tool list, kept `ttl` seconds (per process), refreshed after that or on
    `invalidate`."""

    def __init__(self, ttl: float = DEFAULT_TOOLS_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._lists: dict[tuple[Any, ...], tuple[float, list[McpToolDef]]] = {}

    def get(self, server: McpServerConfig) -> list[McpToolDef] | None:
        entry = self._lists.get(server.fingerprint())
        if entry is None or time.monotonic() - entry[0] > self.ttl:
            return None
        return entry[1]

    def put(self, server: McpServerConfig, tools: list[McpToolDef]) -> None:
        self._lists[server.fingerprint()] = (time.monotonic(), list(tools))

    def invalidate(self, server: McpServerConfig | None = None) -> None:
        if server is None:
            self._lists.clear()
        else:
            self._lists.pop(server.fingerprint(), None)


# The process's cache: turns of every session share the lists (not the sessions).
TOOL_LISTS = ToolListCache()


@dataclass(frozen=True, slots=True)
class UnavailableServer:
    name: str
    reason: str

    def notice(self) -> str:
        return (
            f"The MCP server {self.name!r} is unavailable ({self.reason}); "
            "its tools are not offered in this turn."
        )


class McpToolbox:
    def __init__(
        self,
        servers: Iterable[McpServerConfig | dict[str, Any]],
        *,
        cache: ToolListCache | None = None,
        server_mode: bool = False,
    ) -> None:
        self.servers = {
            config.name: config for config in (McpServerConfig.from_mapping(raw) for raw in servers)
        }
        self.cache = cache if cache is not None else TOOL_LISTS
        self.server_mode = server_mode
        self.tools: list[Tool] = []
        self.unavailable: list[UnavailableServer] = []
        self._connections: dict[str, McpConnection] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._closed = False

    async def __aenter__(self) -> McpToolbox:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self, *, refresh: bool = False) -> McpToolbox:
        """List every server's tools (at once, not one after another)."""
        configs = list(self.servers.values())
        listed = await asyncio.gather(*(self._tools_of(c, refresh) for c in configs))
        for config, outcome in zip(configs, listed, strict=True):
            if isinstance(outcome, UnavailableServer):
                self.unavailable.append(outcome)
                continue
            self.tools.extend(
                bridge_mcp_tool(config, tool, self.call, server_mode=self.server_mode)
                for tool in outcome
            )
        return self

    async def _tools_of(
        self, config: McpServerConfig, refresh: bool
    ) -> list[McpToolDef] | UnavailableServer:
        cached = None if refresh else self.cache.get(config)
        if cached is not None:
            return cached
        try:
            connection = await self._connection(config.name)
            tools = await connection.list_tools()
        except Exception as error:
            return UnavailableServer(config.name, _reason(error))
        self.cache.put(config, tools)
        return tools

    async def _connection(self, name: str) -> McpConnection:
        if self._closed:
            raise McpUnavailable("the turn has ended")
        lock = self._opening.setdefault(name, asyncio.Lock())
        async with lock:
            connection = self._connections.get(name)
            if connection is None or not connection.alive:
                if connection is not None:
                    await connection.close()
                connection = await McpConnection(self.servers[name]).open()
                self._connections[name] = connection
            return connection

    async def call(self, server: str, tool: str, arguments: Any) -> McpCallResult:
        """Call `tool` on `server` through this turn's session with it."""
        try:
            connection = await self._connection(server)
        except McpUnavailable as error:
            raise McpUnavailable(f"the MCP server {server!r} is unavailable ({error})") from None
        return await connection.call_tool(tool, arguments)

    async def close(self) -> None:
        self._closed = True
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    @property
    def open_sessions(self) -> int:
        return sum(1 for c in self._connections.values() if c.alive)


def _reason(error: BaseException) -> str:
    return str(error) if isinstance(error, McpUnavailable) else describe(error)
