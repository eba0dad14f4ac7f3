"""An MCP server's tool as a Glove tool (glove-mcp's `bridgeMcpTool`, its texts kept).

- named `{server}__{tool}`; the server's raw JSON Schema is sent to the model and not
  validated here (the server is the source of truth);
- a declared `outputSchema` adds `Returns: <shape>` to the description;
- the model reads the server's `structuredContent` as JSON when there is one, else the joined
  text parts; the whole `content[]` goes to `renderData` for the page;
- a result flagged `isError` is an error with the text as its message; a call that fails
  (server gone, timeout, 401) is an error the model reads, never an exception out of the turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from gloveapp.core.mcp.config import MCP_NAMESPACE_SEP, McpServerConfig
from gloveapp.core.mcp.connection import McpCallResult, McpCallTimeout, McpToolDef, describe
from gloveapp.core.tools import Tool, ToolContext
from gloveapp.core.types import ToolResultData

MAX_FIELDS = 24
MAX_DEPTH = 4
AUTH_EXPIRED = "auth_expired"
_UNAUTHORIZED = re.compile(r"401|unauthori[sz]ed", re.IGNORECASE)

# call(server_name, tool_name, arguments): the turn's connection to that server.
CallTool = Callable[[str, str, Any], Awaitable[McpCallResult]]


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{server}{MCP_NAMESPACE_SEP}{tool}"


def bridge_mcp_tool(
    server: McpServerConfig, tool: McpToolDef, call: CallTool, *, server_mode: bool = False
) -> Tool:
    base = tool.description if tool.description is not None else f"MCP tool {tool.name}"
    shape = json_schema_to_shape(tool.output_schema) if tool.output_schema else None
    description = f"{base}\n\nReturns: {shape}" if shape else base

    called = mcp_tool_name(server.name, tool.name)

    async def run(arguments: Any, ctx: ToolContext) -> ToolResultData:
        try:
            result = await call(server.name, tool.name, arguments)
        except Exception as error:
            if _is_auth_error(error):
                return ToolResultData.error(AUTH_EXPIRED)
            text = _error_text(error)
            if isinstance(error, McpCallTimeout):
                # Named as the model called it (`slowmem__read_graph`), not as the server
                # knows it (`read_graph`): the model can tell which of its tools timed out.
                text = text.replace(f"MCP tool {tool.name} ", f"MCP tool {called} ", 1)
            return ToolResultData.error(text)
        text = "\n".join(
            part["text"]
            for part in result.content
            if part.get("type") == "text" and isinstance(part.get("text"), str)
        )
        if result.is_error:
            return ToolResultData(
                status="error",
                message=text or f"MCP tool {tool.name} returned an error",
                data=result.content,
            )
        if result.structured_content is not None:
            data = _js_json(result.structured_content)
        else:
            data = text or _js_json(result.content)
        return ToolResultData(status="success", data=data, render_data=result.content)

    return Tool(
        name=called,
        description=description,
        run=run,
        json_schema=tool.input_schema,
        requires_permission=_permission(server, tool, server_mode),
        label=server.tool_label(tool.name, tool.title),
        extra={"mcp_server": server.name, "mcp_tool": tool.name},
    )


def _permission(server: McpServerConfig, tool: McpToolDef, server_mode: bool) -> bool:
    if server.permission == "always":
        return True
    if server.permission == "never":
        return False
    # glove-mcp: never in serverMode (nobody to ask), else unless annotated read-only.
    return not server_mode and not tool.read_only


def _is_auth_error(error: BaseException) -> bool:
    status = getattr(getattr(error, "response", None), "status_code", None)
    return status == 401 or bool(_UNAUTHORIZED.search(describe(error)))


def _error_text(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error).strip() or type(error).__name__


def _js_json(value: Any) -> str:
    """What JS `JSON.stringify` prints: no spaces, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_schema_to_shape(schema: Any, depth: int = 0) -> str | None:
    """A compact TS-like rendering of a JSON Schema (glove-mcp's `jsonSchemaToShape`):
    `{ number: number, title: string }[]`; None when the node says nothing usable."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return _js_json(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return "|".join(_js_json(value) for value in enum)
    variants = schema.get("anyOf")
    if variants is None:
        variants = schema.get("oneOf")
    if isinstance(variants, list) and variants:
        rendered: list[str] = []
        for variant in variants:
            shape = json_schema_to_shape(variant, depth)
            if shape and shape not in rendered:
                rendered.append(shape)
        if rendered:
            return "|".join(rendered)
    raw_type = schema.get("type")
    if isinstance(raw_type, list):
        raw_type = next((t for t in raw_type if t != "null"), None)
    kind = raw_type or (
        "object"
        if schema.get("properties") is not None
        else "array"
        if schema.get("items") is not None
        else None
    )
    if kind == "array":
        return f"{json_schema_to_shape(schema.get('items'), depth) or 'unknown'}[]"
    if kind == "object":
        properties = schema.get("properties")
        if depth >= MAX_DEPTH or not isinstance(properties, dict) or not properties:
            return "object"
        keys = list(properties)
        parts = [
            f"{key}: {json_schema_to_shape(properties[key], depth + 1) or 'unknown'}"
            for key in keys[:MAX_FIELDS]
        ]
        more = ", …" if len(keys) > MAX_FIELDS else ""
        return "{ " + ", ".join(parts) + more + " }"
    if kind == "string":
        return "string"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    return None
