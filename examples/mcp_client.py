"""A workspace's agent, in a few lines: push to the user's Inbox, then read their replies.

Uses the official MCP Python SDK's client (the `mcp` package the server installs) over
streamable HTTP, as Claude Code or any MCP client reaches a workspace:

    python examples/mcp_client.py http://127.0.0.1:8000/mcp/ws-... gws_... --push "Which index?"
    python examples/mcp_client.py http://127.0.0.1:8000/mcp/ws-... gws_...   # read replies

`create_workspace` prints the URL and the token (and `--write` puts them into the folder's
`.mcp.json`). It prints one JSON document: the push's answer (if any) and the replies
`inbox_read` handed out; each reply is handed out once, so a second run prints none.
`--wait N` polls for up to N seconds until a reply arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
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


async def main(url: str, token: str, push: str | None, wait: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        if push:
            out["pushed"] = await call(session, "inbox_push", {"comments": push})
        deadline = time.monotonic() + wait
        while True:
            answer = await call(session, "inbox_read", {"limit": 1})
            out["replies"] = answer["replies"]
            if answer["replies"] or time.monotonic() >= deadline:
                return out
            await asyncio.sleep(0.5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="The workspace's MCP URL, http://…/mcp/<workspace id>")
    parser.add_argument("token", help="The workspace's bearer token (gws_…)")
    parser.add_argument("--push", help="Push this Markdown comment to the Inbox first.")
    parser.add_argument("--wait", type=float, default=0, help="Seconds to wait for a reply.")
    args = parser.parse_args()
    try:
        result = asyncio.run(main(args.url, args.token, args.push, args.wait))
    except Exception as exc:  # a readable line, not a traceback, for a wrong URL or token
        sys.exit(f"error: {exc}")
    print(json.dumps(result, indent=2))
