"""The MCP SDK's own client on a workspace endpoint (tests and bench/workspace_inbox.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def mcp_session(
    url: str, token: str, transport: httpx.AsyncBaseTransport | None = None
) -> AsyncIterator[ClientSession]:
    """An initialised session; the bearer token rides on every request. `transport`: how to
    reach the server (httpx's own over the network, or an in-process application's)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30, transport=transport) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
