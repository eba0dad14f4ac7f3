"""A session's history as the chat page draws it: bubbles, tool cards, notes and dividers.

The history is shown whole (compaction never deletes messages; the model sees only what
follows the last marker, people see everything, with a divider at each marker). Tool results
ride on user messages in Glove; here they are folded back under the agent message that called
the tool and drawn with the tool's colocated `result_template`, from `render_data`, so a page
reloaded later shows a past result exactly as it first appeared. Plain data, next to
`transcript.py` (the admin's reading of the same history); the pages render it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import get_agent_spec
from gloveapp.agents.labels import TOOL_LABELS, banner_answers, tool_label, tool_labels
from gloveapp.conversations import selectors
from gloveapp.conversations.handoff import (
    AUTHOR_KEY,
    HANDOFF_FRAMEWORK_CONTEXT,
    handoff_note_words,
)
from gloveapp.conversations.models import Message, Session
from gloveapp.core.executor import SUBAGENT_TOOL_NAME, permission_denied_message

GENERIC_RESULT_TEMPLATE = "tools/generic_result.html"
TOOL_STATUS_WORDS = {"aborted": "stopped", "error": "failed", "success": "done"}


@dataclass(slots=True)
class ToolEntry:
    """One tool call in the history, with its result once the result message exists."""

    tool_name: str
    call_id: str | None
    input: Any
    result_template: str
    status: str | None = None  # None while the tool has not answered yet
    data: Any = None
    message: str | None = None
    render_data: Any = None
    # The customer declined the permission prompt: the message is the text meant for the
    # model; the page says it in plain words and keeps that text under "Details".
    denied: bool = False
    # A delegation to a subagent: the child's conversation, shown nested under the call.
    child: Session | None = None
    # The tool's name as a customer reads it (`Tool.label`), never the internal one.
    label: str = ""
    # What staff changed before it ran ("A barista changed the quantity of … from 6 to 4").
    changes: list[str] = field(default_factory=list)
    # A result past the cap (`core.results`): {"bytes", "shownBytes"}; the page shows the
    # head and links the whole for download.
    truncated: dict[str, Any] | None = None

    @property
    def shown_message(self) -> str | None:
        if self.denied:
            return f"You didn't allow {(self.label or self.tool_name).lower()}, so it did not run."
        return self.message

    @property
    def shown_status(self) -> str:
        """How the card names the call's state: stopped and failed in plain words."""
        return TOOL_STATUS_WORDS.get(self.status or "", self.status or "working…")

    @property
    def template(self) -> str:
        # A colocated renderer draws from render_data (refusals included); a result without
        # it (a thrown error, an aborted call) or a call still running is shown generically.
        if self.status is None or self.render_data is None:
            return GENERIC_RESULT_TEMPLATE
        return self.result_template


@dataclass(slots=True)
class Entry:
    """One row of the timeline: a bubble, a framework note, or a compaction divider."""

    kind: str  # "user" | "agent" | "framework" | "compaction" | "turn-note"
    seq: int
    text: str = ""
    framework_context: str | None = None
    tools: list[ToolEntry] = field(default_factory=list)
    # For the inbox's "[Inbox: N item(s) resolved]" banner: what a person reads instead,
    # ("Restock watch", "Back in stock"), one per item; the raw text stays one click away.
    answers: list[tuple[str, str]] = field(default_factory=list)
    # A person's message (a staff reply) names them: "Bea from the baristas".
    author: str = ""
    # A handoff note in the words a customer reads ("A person answers from here"); its
    # text, meant for the agent, is for staff.
    shown: str = ""


def _tool_readings(agent_name: str) -> tuple[dict[str, str], dict[str, str]]:
    """Tool name -> its colocated result template, and -> its label, for the session's agent
    (one build of the agent for both)."""
    try:
        spec = get_agent_spec(agent_name)
    except ImproperlyConfigured:
        # An agent since removed from GLOVE_AGENTS: its history still reads, generically.
        return {}, dict(TOOL_LABELS)
    templates = {tool.name: tool.result_template for tool in spec.tools if tool.result_template}
    return templates, tool_labels(agent_name)


def turn_note_text(turn: Any) -> str:
    """What a transcript says after a stopped or failed turn: who stopped it and when."""
    if turn.status == "failed":
        return f"This turn failed: {turn.error}" if turn.error else "This turn failed."
    when = turn.stopped_at or turn.finished_at
    at = f" at {when:%Y-%m-%d %H:%M:%S} UTC" if when else ""
    who = turn.stopped_by.get_username() if turn.stopped_by else "the server"
    return f"Stopped by {who}{at}."


def timeline(
    session: Session,
    messages: list[Message],
    notes: list[Any] | None = None,
    *,
    from_start: bool = True,
) -> list[Entry]:
    """The entries of `messages` (a contiguous run of the history, oldest first; the whole
    of it unless `from_start` is false) with the turn notes that fall among them."""
    templates, labels = _tool_readings(session.agent_name)
    entries: list[Entry] = []
    # Stopped or failed turns, each noted after its last message.
    notes_after: dict[int, list[Any]] = {}
    for turn in notes or []:
        notes_after.setdefault(turn.end_seq, []).append(turn)

    def add_notes(seq: int) -> None:
        for turn in notes_after.pop(seq, []):
            entries.append(Entry(kind="turn-note", seq=seq, text=turn_note_text(turn)))

    if from_start:
        add_notes(0)
    # Results arrive in a later message than their calls; they find their call by id.
    open_calls: dict[str, ToolEntry] = {}
    for message in messages:
        _add_entry(message, entries, open_calls, templates)
        add_notes(message.seq)
    for seq in sorted(notes_after):
        add_notes(seq)
    _attach_children(session, open_calls, entries)
    for entry in entries:
        for tool in entry.tools:
            tool.label = tool_label(session.agent_name, tool.tool_name, labels)
    return entries


def _add_entry(
    message: Message,
    entries: list[Entry],
    open_calls: dict[str, ToolEntry],
    templates: dict[str, str],
) -> None:
    if message.is_compaction:
        entries.append(Entry(kind="compaction", seq=message.seq, text=message.text))
        return
    if message.tool_results:
        for raw in message.tool_results:
            _attach_result(raw, open_calls, entries, templates, message.seq)
        return
    if message.framework_context == HANDOFF_FRAMEWORK_CONTEXT:
        entries.append(
            Entry(
                kind="framework",
                seq=message.seq,
                text=message.text,
                framework_context=message.framework_context,
                shown=handoff_note_words(message.text),
            )
        )
        return
    if message.framework_context or message.is_skill_injection:
        entries.append(
            Entry(
                kind="framework",
                seq=message.seq,
                text=message.text,
                framework_context=message.framework_context or "skill",
                answers=banner_answers(message.text)
                if message.framework_context == "inbox"
                else [],
            )
        )
        return
    entry = Entry(kind=message.sender, seq=message.seq, text=message.text)
    author = (message.extra or {}).get(AUTHOR_KEY)
    if message.sender == "agent" and isinstance(author, dict):
        entry.author = str(author.get("label") or author.get("name") or "A person")
    for raw in message.tool_calls or []:
        tool_name = raw.get("tool_name", "")
        tool = ToolEntry(
            tool_name=tool_name,
            call_id=raw.get("id"),
            input=raw.get("input_args"),
            result_template=templates.get(tool_name, GENERIC_RESULT_TEMPLATE),
        )
        entry.tools.append(tool)
        open_calls[raw.get("id") or f"name:{tool_name}"] = tool
    entries.append(entry)


def _attach_children(session: Session, open_calls: dict, entries: list[Entry]) -> None:
    # Only the delegations this page shows: a long chat's page reads no other child.
    calls = [
        tool.call_id
        for entry in entries
        for tool in entry.tools
        if tool.tool_name == SUBAGENT_TOOL_NAME and tool.call_id
    ]
    if not calls:
        return
    children = {
        child.parent_call_id: child for child in selectors.session_children(session, call_ids=calls)
    }
    for entry in entries:
        for tool in entry.tools:
            if tool.tool_name == SUBAGENT_TOOL_NAME and tool.call_id in children:
                tool.child = children[tool.call_id]


def _attach_result(
    raw: dict[str, Any],
    open_calls: dict[str, ToolEntry],
    entries: list[Entry],
    templates: dict[str, str],
    seq: int,
) -> None:
    tool_name = raw.get("tool_name", "")
    result = raw.get("result") or {}
    tool = open_calls.pop(raw.get("call_id") or f"name:{tool_name}", None)
    if tool is None:
        # A result without a visible call (its call came before a lost message): show it alone.
        tool = ToolEntry(
            tool_name=tool_name,
            call_id=raw.get("call_id"),
            input=None,
            result_template=templates.get(tool_name, GENERIC_RESULT_TEMPLATE),
        )
        entries.append(Entry(kind="agent", seq=seq, tools=[tool]))
    read_result(tool, result)


def read_result(tool: ToolEntry, result: dict[str, Any]) -> ToolEntry:
    """Fill `tool` from its call's result (Glove's `ToolResultData` dict): the one reading of
    a result, for the history and for the result streamed while the turn runs
    (`tool_frames`)."""
    tool.status = result.get("status")
    tool.data = result.get("data")
    tool.message = result.get("message")
    tool.render_data = result.get("renderData", result.get("render_data"))
    truncated = result.get("truncated")
    tool.truncated = truncated if isinstance(truncated, dict) else None
    tool.denied = tool.status == "error" and (tool.message or "").startswith(
        permission_denied_message(tool.tool_name)
    )
    return tool
