"""`manage.py export_workspace_inbox [--workspace ID] [--output FILE]`: entries.jsonl lines."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from inbox.workspaces.exchange import entries_export


class Command(BaseCommand):
    help = "Write workspace inbox entries as the seed's entries.jsonl lines, oldest first."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--workspace", help="Only this workspace's entries.")
        parser.add_argument("--output", "-o", help="A file to write (default: stdout).")

    def handle(self, *args: Any, workspace: str | None, output: str | None, **options: Any) -> None:
        out = open(output, "w", encoding="utf-8") if output else self.stdout
        count = 0
        try:
            for line in entries_export(workspace_id=workspace):
                # Django's OutputWrapper (self.stdout) ends each write with a newline itself.
                out.write(line + "\n" if output else line)
                count += 1
        finally:
            if output:
                out.close()
        self.stderr.write(f"exported {count} entries")
