"""The tool frames a running turn streams, as each watcher of the session may read them.

While a turn runs, its worker streams `tool_use` (the model called a tool) and
`tool_use_result` (the tool answered) to everyone watching the session: the chat page, the
SSE stream and the websocket of any client. The worker adds what the chat page shows of a
call (`tool_reading`, `with_reading`): the tool's label, the call's summary (the tool's `summary`, in
staff's words and in the customer's) and, for a result, its state and message in plain
words. Each watcher then gets its own cut (`shown_tool_frame`), by the page's rule
(`access.may_see_tool_data`): staff get the raw arguments and result beside the reading; the
customer gets the reading and what a tool's own card shows them (`renderData`), never the
JSON the page keeps under staff's "Details" (arguments, `data`).

    tool_use          {id, name, label, summary}            staff also: input
    tool_use_result   {id, name, tool_name, call_id, duration_ms, label, summary,
                       status, statusText, message,
                       result: {status, message, renderData, truncated}}
                                                            staff: result as the tool returned it

`message` is what the page's card says (a declined permission in plain words); staff's
`result.message` is what the model read.
"""

from __future__ import annotations

from typing import Any

from gloveapp.agents.labels import shown_tool_label
from gloveapp.conversations.timeline import ToolEntry, read_result
from gloveapp.core.tools import CallSummary, Tool

TOOL_USE = "tool_use"
TOOL_USE_RESULT = "tool_use_result"
TOOL_FRAMES = frozenset({TOOL_USE, TOOL_USE_RESULT})
# Where the worker puts the reading in the frame it sends to the channel layer; no watcher
# receives this key, `shown_tool_frame` takes the watcher's cut of it.
READING = "_reading"


def tool_reading(tool: Tool | None, tool_name: str, summary: CallSummary | None) -> dict[str, Any]:
    """What the page shows of a call of `tool_name` (its agent's `tool`, None for a built-in
    or a tool since removed): the label, and the summary in staff's and the customer's
    words."""
    return {
        "label": shown_tool_label(tool, tool_name),
        "summary": summary.text if summary else None,
        "customerSummary": (summary.customer or summary.text) if summary else None,
    }


def with_reading(payload: dict[str, Any], reading: dict[str, Any]) -> dict[str, Any]:
    """The frame the worker streams: Glove's payload with the call's reading beside it."""
    return {**payload, READING: reading}


def frame_tool_name(payload: dict[str, Any]) -> str:
    return str(payload.get("name") or payload.get("tool_name") or "")


def frame_call_id(payload: dict[str, Any]) -> str | None:
    return payload.get("id") or payload.get("call_id")


def shown_tool_frame(event_type: str, payload: dict[str, Any], *, staff: bool) -> dict:
    """The frame as a watcher may read it: `staff` by `access.may_see_tool_data`."""
    if event_type not in TOOL_FRAMES:
        return payload
    reading = payload.get(READING)
    if not isinstance(reading, dict):  # a frame from a worker that adds no reading
        reading = tool_reading(None, frame_tool_name(payload), None)
    summary = reading.get("summary") if staff else reading.get("customerSummary")
    shown: dict[str, Any] = {
        "id": frame_call_id(payload),
        "name": frame_tool_name(payload),
        "label": reading.get("label"),
        "summary": summary,
    }
    if event_type == TOOL_USE:
        if staff:
            shown["input"] = payload.get("input")
        return shown
    result = payload.get("result") if isinstance(payload.get("result"), dict) else {}
    entry = read_result(
        ToolEntry(
            tool_name=shown["name"],
            call_id=shown["id"],
            input=None,
            result_template="",
            label=str(reading.get("label") or ""),
        ),
        result,
    )
    shown |= {
        "tool_name": shown["name"],
        "call_id": shown["id"],
        "duration_ms": payload.get("duration_ms"),
        "status": entry.status,
        "statusText": entry.shown_status,
        "message": entry.shown_message,
    }
    if staff:
        shown["result"] = result
    else:
        shown["result"] = {
            "status": entry.status,
            "message": entry.shown_message,
            "renderData": entry.render_data,
            "truncated": entry.truncated,
        }
    return shown
