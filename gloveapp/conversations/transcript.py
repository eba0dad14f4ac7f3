"""A session's history as a person reads it: who said what, tools summarised, JSON aside.

The admin's session page shows this instead of one table row of raw JSON per message (about
12,000 px for a short chat). Every line keeps its message's stored JSON, which the page
folds away behind a click. Plain data: the template escapes every string it shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gloveapp.agents.labels import banner_answers
from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.serialization import MESSAGE_VALUES

# A summary of a tool's input or result is cut here; the whole value is in the raw JSON.
SUMMARY_CHARS = 160


@dataclass(slots=True)
class ToolLine:
    name: str
    summary: str
    status: str = ""  # results only: "success", "error", "aborted"


@dataclass(slots=True)
class TranscriptLine:
    seq: int
    kind: str  # "user" | "agent" | "tool-results" | "framework" | "compaction"
    who: str
    text: str
    created_at: datetime
    raw_json: str
    # The agent version whose turn wrote it ("coffee v3"; empty: none).
    version: str = ""
    calls: list[ToolLine] = field(default_factory=list)
    results: list[ToolLine] = field(default_factory=list)
    # An inbox banner, read: ("Restock watch", "Back in stock") per resolved item.
    answers: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class Transcript:
    lines: list[TranscriptLine]
    total: int  # messages in the session; `lines` holds the newest of them

    @property
    def older(self) -> int:
        return self.total - len(self.lines)


def summarise(value: Any) -> str:
    """A value on one line, as JSON (not a Python repr), cut at SUMMARY_CHARS."""
    if value in (None, {}, []):
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "\u2026"


def _raw_json(row: Message) -> str:
    stored = {name: getattr(row, name) for name in MESSAGE_VALUES}
    stored = {"seq": row.seq, **{k: v for k, v in stored.items() if v not in (None, False)}}
    return json.dumps(stored, ensure_ascii=False, indent=2, default=str)


# A result's status as people read it: a stopped or failed call says so.
STATUS_WORDS = {"aborted": "stopped", "error": "failed"}


def stopped_note(data: Any) -> str | None:
    """ "Stopped by carla at ...": who stopped a call's turn, as a stopped turn stores it."""
    if not isinstance(data, dict) or "stoppedAt" not in data:
        return None
    who = data.get("stoppedBy") or "the server"
    return f"Stopped by {who} at {data.get('stoppedAt')}"


def _result_line(raw: Any) -> ToolLine:
    raw = raw if isinstance(raw, dict) else {}
    result = raw.get("result") if isinstance(raw.get("result"), dict) else {}
    status = str(result.get("status") or "")
    outcome = result.get("message") if status != "success" else None
    if status == "aborted":
        outcome = stopped_note(result.get("data")) or outcome
    return ToolLine(
        name=str(raw.get("tool_name") or "?"),
        summary=summarise(outcome or result.get("data")),
        status=STATUS_WORDS.get(status, status),
    )


def _call_line(raw: Any) -> ToolLine:
    raw = raw if isinstance(raw, dict) else {}
    return ToolLine(name=str(raw.get("tool_name") or "?"), summary=summarise(raw.get("input_args")))


def transcript_line(row: Message) -> TranscriptLine:
    line = TranscriptLine(
        seq=row.seq,
        kind=row.sender,
        who="Agent" if row.sender == "agent" else "User",
        text=row.text,
        created_at=row.created_at,
        raw_json=_raw_json(row),
        version=str(row.agent_version) if row.agent_version_id else "",
    )
    if row.is_compaction:
        line.kind, line.who = "compaction", "Compacted: the model's context restarts here"
    elif row.tool_results:
        line.kind, line.who, line.text = "tool-results", "Tool results", ""
        line.results = [_result_line(raw) for raw in row.tool_results]
    elif row.framework_context or row.is_skill_injection:
        line.kind = "framework"
        line.who = f"Framework ({row.framework_context or 'skill'})"
        if row.framework_context == "inbox":
            line.who = "Inbox banner (framework)"
            line.answers = banner_answers(row.text)
    line.calls = [_call_line(raw) for raw in row.tool_calls or []]
    return line


def session_transcript(session: Session, *, newest: int) -> Transcript:
    """The newest `newest` messages of `session`, oldest first, as transcript lines."""
    rows = list(
        Message.objects.filter(session=session)
        .select_related("agent_version")
        .order_by("-seq")[:newest]
    )
    total = Message.objects.filter(session=session).count() if len(rows) == newest else len(rows)
    return Transcript(lines=[transcript_line(row) for row in reversed(rows)], total=total)
