"""`manage.py create_workspace --label … --root … [--owner USER]`: a workspace and its token."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from inbox.workspaces.services import mcp_url, workspace_create


def mcp_json(url: str, token: str) -> str:
    """A ready `.mcp.json` for the workspace folder (Claude Code and other MCP clients)."""
    server = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
    return json.dumps({"mcpServers": {"glove-workspace": server}}, indent=2)


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
            "--base-url",
            default=getattr(settings, "GLOVE_PUBLIC_URL", "http://127.0.0.1:8000"),
            help="The server's URL as the agent reaches it.",
        )

    def handle(self, *args: Any, label: str, root: str, owner: str | None, **options: Any) -> None:
        try:
            workspace, token = workspace_create(label=label, root=root, owner=resolve_owner(owner))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        url = mcp_url(options["base_url"], workspace.pk)
        self.stdout.write(f"id:    {workspace.pk}\n")
        self.stdout.write(f"url:   {url}\n")
        self.stdout.write(
            f"token: {token}   (shown once; rotate_workspace_token makes a new one)\n"
        )
        self.stdout.write(f"\n.mcp.json for {workspace.root}:\n{mcp_json(url, token)}\n")
