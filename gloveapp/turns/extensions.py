"""What an agent's extensions add to one turn: its MCP servers' tools (one client session
per server for the turn, closed at its end), its subagents, skills and hooks.

    async with mount_extensions(glove, turn=turn, spec=spec, tools=tools) as mounted:
        result = await glove.process_request(...)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import AgentSpec
from gloveapp.core.glove import Glove
from gloveapp.core.mcp import TOOL_LISTS, McpConfigError, McpServerConfig, McpToolbox
from gloveapp.core.tools import Tool
from gloveapp.turns import services
from gloveapp.turns.models import Turn

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class MountedExtensions:
    toolbox: McpToolbox | None = None
    notices: list[str] = field(default_factory=list)


def mcp_servers_of(spec: AgentSpec) -> list[McpServerConfig]:
    """The agent's MCP servers, validated (ImproperlyConfigured names the field)."""
    try:
        servers = [
            McpServerConfig.from_mapping(raw, where=f"GLOVE_AGENTS[{spec.name!r}].mcp_servers")
            for raw in spec.mcp_servers
        ]
    except McpConfigError as error:
        raise ImproperlyConfigured(str(error)) from None
    names = [server.name for server in servers]
    if len(set(names)) != len(names):
        raise ImproperlyConfigured(
            f"GLOVE_AGENTS[{spec.name!r}].mcp_servers: two servers share a name"
        )
    return servers


@contextlib.asynccontextmanager
async def mount_extensions(
    glove: Glove, *, turn: Turn, worker_id: str, spec: AgentSpec, tools: dict[str, Tool]
) -> AsyncIterator[MountedExtensions]:
    mounted = MountedExtensions()
    servers = mcp_servers_of(spec)
    try:
        if servers:
            TOOL_LISTS.ttl = settings.GLOVE_MCP_TOOLS_TTL_SECONDS
            mounted.toolbox = await McpToolbox(
                servers, server_mode=turn.source == services.MESH_SOURCE
            ).start()
            for tool in mounted.toolbox.tools:
                glove.fold(tool)
                tools[tool.name] = tool
            for down in mounted.toolbox.unavailable:
                logger.warning("turn %s: %s", turn.pk, down.notice())
                mounted.notices.append(down.notice())
        for notice in mounted.notices:
            await sync_to_async(services.turn_note)(
                turn_id=turn.pk, worker_id=worker_id, text=notice
            )
        yield mounted
    finally:
        if mounted.toolbox is not None:
            await mounted.toolbox.close()
