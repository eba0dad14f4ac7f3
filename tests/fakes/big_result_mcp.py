"""An MCP server (the official SDK's FastMCP, over stdio) whose tools answer with megabytes:
`big_text` returns that many MB of text, `big_structured` as `structuredContent`.

Run: python tests/fakes/big_result_mcp.py [port]   (stdio, or streamable HTTP on the port)
"""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("big")
READ_ONLY = ToolAnnotations(readOnlyHint=True)
LINE = "The quick brown fox jumps over the lazy dog. 0123456789 <b>&amp;</b>\n"


def _text(megabytes: int) -> str:
    size = max(1, min(megabytes, 64)) * 1024 * 1024
    return (LINE * (size // len(LINE) + 1))[:size]


@server.tool(annotations=READ_ONLY)
def big_text(megabytes: int = 20) -> str:
    """Answer with `megabytes` MB of text."""
    return _text(megabytes)


@server.tool(annotations=READ_ONLY, structured_output=True)
def big_structured(megabytes: int = 20) -> dict[str, Any]:
    """Answer with `megabytes` MB of structured content."""
    rows = _text(megabytes).splitlines()
    return {"rows": rows, "count": len(rows)}


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:  # a port: streamable HTTP at http://127.0.0.1:<port>/mcp
        server.settings.host, server.settings.port = "127.0.0.1", int(sys.argv[1])
        server.settings.log_level = "WARNING"
        server.run("streamable-http")
    else:
        server.run("stdio")
