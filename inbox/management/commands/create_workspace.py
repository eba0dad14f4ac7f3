"""`manage.py create_workspace --label … --root … [--owner USER] [--agent NAME] [--write
[--force]]`: a workspace and its token; `--write` puts the `.mcp.json` into the folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from inbox.workspaces.services import mcp_url, public_url, workspace_create

MCP_JSON = ".mcp.json"


def mcp_json(url: str, token: str) -> str:
    """A ready `.mcp.json` for the workspace folder (Claude Code and other MCP clients)."""
    server = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
    return json.dumps({"mcpServers": {"glove-workspace": server}}, indent=2)


def write_private(path: Path, text: str, *, replace: bool) -> None:
    """Write a file only its owner may read (it holds a token); `replace` swaps an existing
    one whole, through a new file renamed over it, never rewriting it in place."""
    if not replace:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        return
    fresh = path.with_name(f"{path.name}.{os.getpid()}.new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(fresh, path)


def resolve_owner(username: str | None) -> Any:
    users = get_user_model().objects
    if username:
        owner = users.filter(username=username).first()
        if owner is None:
            raise CommandError(f"--owner: no user named {username!r}")
        return owner
    superusers = list(users.filter(is_superuser=True)[:2])
    if len(superusers) != 1:
        raise CommandError("--owner: say whose inbox the workspace's entries go to")
    return superusers[0]


class Command(BaseCommand):
    help = "Create a workspace; prints its id, MCP URL, bearer token (shown once) and .mcp.json."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--label", required=True, help="A name people recognise.")
        parser.add_argument("--root", required=True, help="The workspace folder on disk.")
        parser.add_argument(
            "--owner", help="Username whose inbox receives the entries (default: the superuser)."
        )
        parser.add_argument(
            "--agent",
            default="",
            help="One of the server's agents (GLOVE_AGENTS) that receives replies as turns; "
            "by default the workspace's MCP client reads them with inbox_read.",
        )
        parser.add_argument(
            "--write",
            action="store_true",
            help=f"Write {MCP_JSON} into the folder (refused if one is there already).",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help=f"With --write: replace an {MCP_JSON} that is there already.",
        )
        parser.add_argument(
            "--base-url",
            help="The server's URL as the agent reaches it (default: GLOVE_PUBLIC_URL, else "
            "where `make run` last served).",
        )

    def handle(self, *args: Any, label: str, root: str, owner: str | None, **options: Any) -> None:
        owner_user = resolve_owner(owner)
        target = Path(root).expanduser() / MCP_JSON
        if options["force"] and not options["write"]:
            raise CommandError("--force: only with --write")
        if options["write"] and target.exists() and not options["force"]:
            # Checked first: a refused write leaves no workspace behind.
            raise CommandError(
                f"--write: {target} exists already; move it aside, or add --force to replace it"
            )
        try:
            workspace, token = workspace_create(
                label=label, root=root, owner=owner_user, agent_name=options["agent"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        url = mcp_url(options["base_url"] or public_url(), workspace.pk)
        self.stdout.write(f"id:    {workspace.pk}\n")
        self.stdout.write(f"url:   {url}\n")
        self.stdout.write(
            f"token: {token}   (shown once; rotate_workspace_token makes a new one)\n"
        )
        if options["write"]:
            written = Path(workspace.root) / MCP_JSON
            write_private(written, mcp_json(url, token) + "\n", replace=options["force"])
            self.stdout.write(f"\nwrote {written}: start Claude Code in that folder.\n")
        else:
            self.stdout.write(f"\n.mcp.json for {workspace.root}:\n{mcp_json(url, token)}\n")
