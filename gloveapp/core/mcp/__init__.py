"""MCP client tools: an agent uses the tools an MCP server serves (glove-mcp's bridge).

Django-free: the server configuration, a connection over the official `mcp` SDK client
(streamable HTTP or stdio), the bridge that turns a server's tool into a Glove tool named
`{server}__{tool}`, and the per-turn toolbox that holds one session per server.
"""

from __future__ import annotations

from gloveapp.core.mcp.bridge import bridge_mcp_tool, json_schema_to_shape, mcp_tool_name
from gloveapp.core.mcp.config import MCP_NAMESPACE_SEP, McpConfigError, McpServerConfig
from gloveapp.core.mcp.connection import (
    McpCallResult,
    McpCallTimeout,
    McpConnection,
    McpToolDef,
    McpUnavailable,
    connect,
)
from gloveapp.core.mcp.toolbox import TOOL_LISTS, McpToolbox, ToolListCache, UnavailableServer

__all__ = [
    "MCP_NAMESPACE_SEP",
    "TOOL_LISTS",
    "McpCallResult",
    "McpCallTimeout",
    "McpConfigError",
    "McpConnection",
    "McpServerConfig",
    "McpToolDef",
    "McpToolbox",
    "McpUnavailable",
    "ToolListCache",
    "UnavailableServer",
    "bridge_mcp_tool",
    "connect",
    "json_schema_to_shape",
    "mcp_tool_name",
]
