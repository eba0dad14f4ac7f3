"""`manage.py import_workspace_inbox FILE`: load entries.jsonl; idempotent by id.

Malformed lines are skipped and listed (line number and reason) on stderr; the exit status
is 0 when every line imported or was already present, 2 when some were skipped.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inbox.workspaces.exchange import entries_import

EXIT_SOME_MALFORMED = 2


class Command(BaseCommand):
    help = "Import the seed's entries.jsonl ('-' for stdin); skips and reports malformed lines."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file")

    def handle(self, *args: Any, file: str, **options: Any) -> None:
        try:
            source = sys.stdin if file == "-" else open(file, encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        with source:
            report = entries_import(lines=source)
        for number, reason in report.malformed:
            self.stderr.write(f"line {number}: skipped: {reason}")
        self.stdout.write(
            f"imported {report.imported}, already present {report.already_present}, "
            f"malformed {len(report.malformed)}\n"
        )
        if report.malformed:
            raise CommandError(
                f"{len(report.malformed)} malformed line(s) skipped", returncode=EXIT_SOME_MALFORMED
            )
