"""`manage.py rotate_workspace_token WORKSPACE_ID`: a new token; the old one stops at once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inbox.management.commands.create_workspace import mcp_json
from inbox.workspaces.models import Workspace
from inbox.workspaces.services import mcp_url, public_url, workspace_rotate_token


class Command(BaseCommand):
    help = "Replace a workspace's bearer token; prints the new one (once) and its .mcp.json."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("workspace_id")
        parser.add_argument(
            "--base-url",
            help="The server's URL as the agent reaches it (default: GLOVE_PUBLIC_URL, else "
            "where `make run` last served).",
        )

    def handle(self, *args: Any, workspace_id: str, base_url: str, **options: Any) -> None:
        workspace = Workspace.objects.filter(pk=workspace_id).first()
        if workspace is None:
            raise CommandError(f"no workspace {workspace_id!r}")
        token = workspace_rotate_token(workspace=workspace)
        url = mcp_url(base_url or public_url(), workspace.pk)
        self.stdout.write(f"token: {token}   (shown once)\n")
        self.stdout.write(f"\n.mcp.json:\n{mcp_json(url, token)}\n")
