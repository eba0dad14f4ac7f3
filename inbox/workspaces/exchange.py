"""The seed's `entries.jsonl` as an exchange format: export entries, import such a file.

Import is idempotent by id (an entry already stored is skipped) and reports each malformed
line with its number and reason instead of failing the file or dropping it silently.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import connection, transaction

from gloveapp.core.input_rules import unstorable_text_problem
from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import workspace_stream
from inbox.workspaces import paths
from inbox.workspaces.models import Workspace, WorkspaceEntry
from inbox.workspaces.services import (
    MAX_COMMENTS_CHARS,
    MAX_DOCS,
    MAX_LABEL_CHARS,
    entry_wire,
)

BATCH = 1000
# After a bulk load this large, refresh the planner's statistics at once: until autovacuum
# gets to it, PostgreSQL may plan the history query as if the table were still small.
ANALYZE_AFTER = 1000


@dataclass
class ImportReport:
    imported: int = 0
    already_present: int = 0
    malformed: list[tuple[int, str]] = field(default_factory=list)


def entries_export(*, workspace_id: str | None = None) -> Iterator[str]:
    """One JSON line per entry, oldest first (the seed's append order)."""
    rows = WorkspaceEntry.objects.order_by("ts", "id")
    if workspace_id is not None:
        rows = rows.filter(workspace_id=workspace_id)
    for entry in rows.iterator(chunk_size=BATCH):
        yield json.dumps(entry_wire(entry), ensure_ascii=False)


def _parse(line: str, workspaces: dict[str, Workspace | None]) -> WorkspaceEntry:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    try:
        entry_id = uuid.UUID(str(data.get("id")))
    except ValueError:
        raise ValueError("id: must be a UUID") from None
    ts = data.get("ts")
    if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
        raise ValueError("ts: must be epoch milliseconds")
    workspace_id = data.get("workspaceId")
    if not isinstance(workspace_id, str) or not workspace_id:
        raise ValueError("workspaceId: is required")
    if workspace_id not in workspaces:
        workspaces[workspace_id] = Workspace.objects.filter(pk=workspace_id[:64]).first()
    workspace = workspaces[workspace_id]
    if workspace is None:
        raise ValueError(f"workspaceId: no such workspace {workspace_id!r}")
    label = data.get("workspaceLabel", "")
    if not isinstance(label, str) or len(label) > MAX_LABEL_CHARS or unstorable_text_problem(label):
        raise ValueError("workspaceLabel: must be a short string")
    docs = data.get("docs", [])
    if not isinstance(docs, list) or len(docs) > MAX_DOCS:
        raise ValueError(f"docs: must be an array of at most {MAX_DOCS}")
    cleaned = []
    for index, doc in enumerate(docs):
        path = doc.get("path") if isinstance(doc, dict) else None
        try:
            cleaned.append({"path": paths.check_relative(path)})
        except paths.PathRefused as exc:
            raise ValueError(f"docs[{index}].path: {exc}") from None
    comments = data.get("comments")
    if comments is not None and (
        not isinstance(comments, str)
        or len(comments) > MAX_COMMENTS_CHARS
        or unstorable_text_problem(comments)
    ):
        raise ValueError("comments: must be a Markdown string")
    if not cleaned and (comments is None or not comments.strip()):
        raise ValueError("docs: at least one of docs or comments must be present")
    return WorkspaceEntry(
        id=entry_id,
        ts=ts,
        workspace=workspace,
        workspace_label=label,
        owner_id=workspace.owner_id,
        docs=cleaned,
        comments=comments,
    )


def entries_import(*, lines: Iterable[str]) -> ImportReport:
    report = ImportReport()
    workspaces: dict[str, Workspace | None] = {}
    batch: list[WorkspaceEntry] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            batch.append(_parse(line, workspaces))
        except ValueError as exc:
            report.malformed.append((number, str(exc)))
        if len(batch) >= BATCH:
            _store(batch, report)
            batch = []
    _store(batch, report)
    if report.imported >= ANALYZE_AFTER and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {WorkspaceEntry._meta.db_table}")
    return report


def _store(batch: list[WorkspaceEntry], report: ImportReport) -> None:
    if not batch:
        return
    unique = {entry.id: entry for entry in batch}  # a file may repeat an id
    report.already_present += len(batch) - len(unique)
    with transaction.atomic():
        present = set(
            WorkspaceEntry.objects.filter(id__in=list(unique)).values_list("id", flat=True)
        )
        fresh = [entry for entry_id, entry in unique.items() if entry_id not in present]
        WorkspaceEntry.objects.bulk_create(fresh, ignore_conflicts=True)
        report.imported += len(fresh)
        report.already_present += len(present)
        # One event per workspace and batch: the pages reload their list.
        for workspace_id in sorted({entry.workspace_id for entry in fresh}):
            record_event(
                stream=workspace_stream(workspace_id),
                type="workspace.entries.imported",
                payload={"count": sum(1 for e in fresh if e.workspace_id == workspace_id)},
            )
