"""A workspace's agent, in a few lines: push to the user's Inbox, then read their replies.

Uses the official MCP Python SDK's client (the `mcp` package the server installs) over
streamable HTTP, as Claude Code or any MCP client reaches a workspace:

    python examples/mcp_client.py --push "Done: see the summary" --doc README.md
    python examples/mcp_client.py                       # read the replies
    python examples/mcp_client.py http://127.0.0.1:8000/mcp/ws-... gws_... --push "Which index?"

`create_workspace --write` puts the workspace's URL and token into the folder's `.mcp.json`:
run from that folder, the example reads them from there (or pass both, as `create_workspace`
prints them). `--doc PATH` (repeatable) pushes a file of the workspace, relative to its root:
the inbox renders it. It prints one JSON document: the push's answer (if any) and the replies
`inbox_read` handed out; each reply is handed out once, so a second run prints none.
`--wait N` polls for up to N seconds until a reply arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text if result.content else "{}"
    if result.isError:
        raise RuntimeError(f"{tool}: {text}")
    return json.loads(text)


def from_mcp_json(path: Path) -> tuple[str, str]:
    """The workspace server's URL and token from a `.mcp.json` `create_workspace` wrote."""
    try:
        server = json.loads(path.read_text())["mcpServers"]["glove-workspace"]
        return server["url"], server["headers"]["Authorization"].removeprefix("Bearer ")
    except FileNotFoundError:
        raise SystemExit(
            f"error: no {path} here: pass the URL and the token, or run this from the folder "
            "`create_workspace --write` wrote it into"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SystemExit(f"error: {path} has no glove-workspace server with a token") from None


async def main(
    url: str, token: str, push: str | None, wait: float, docs: list[str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        if push or docs:
            arguments: dict[str, Any] = {"docs": [{"path": doc} for doc in docs or []]}
            if push:
                arguments["comments"] = push
            out["pushed"] = await call(session, "inbox_push", arguments)
        deadline = time.monotonic() + wait
        while True:
            answer = await call(session, "inbox_read", {"limit": 1})
            out["replies"] = answer["replies"]
            if answer["replies"] or time.monotonic() >= deadline:
                return out
            await asyncio.sleep(0.5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "url",
        nargs="?",
        help="The workspace's MCP URL, http://…/mcp/<workspace id> (default: from ./.mcp.json)",
    )
    parser.add_argument("token", nargs="?", help="The workspace's bearer token (gws_…)")
    parser.add_argument("--push", help="Push this Markdown comment to the Inbox first.")
    parser.add_argument(
        "--doc",
        action="append",
        metavar="PATH",
        help="Push this file (relative to the workspace's root) with the comment; repeatable.",
    )
    parser.add_argument("--wait", type=float, default=0, help="Seconds to wait for a reply.")
    args = parser.parse_args()
    if (args.url is None) != (args.token is None):
        parser.error("pass both the URL and the token, or neither (read from ./.mcp.json)")
    url, token = (args.url, args.token) if args.url else from_mcp_json(Path(".mcp.json"))
    try:
        result = asyncio.run(main(url, token, args.push, args.wait, args.doc))
    except Exception as exc:  # a readable line, not a traceback, for a wrong URL or token
        sys.exit(f"error: {exc}")
    print(json.dumps(result, indent=2))
