"""A recorded conversation as a replay reads it: the customer's messages, what each turn
answered (replies, tool calls and their arguments, approvals and handoffs asked, tokens,
cost), and the results the tools returned, keyed by tool name and arguments.

Read only: nothing here writes to the recording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gloveapp.agents.config import model_prices
from gloveapp.approvals.models import ApprovalRequest
from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.serialization import message_to_core
from gloveapp.core.builtin_tools import REQUEST_HUMAN_TOOL_NAME
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import ToolResultData
from gloveapp.observe.cost import Usage, total_cost


def call_key(tool_name: str, args: Any) -> str:
    """How a replayed call finds its recorded result: its tool and its arguments."""
    return f"{tool_name}\n{json.dumps(args, sort_keys=True, separators=(',', ':'), default=str)}"


@dataclass(slots=True)
class TurnOutcome:
    """What one turn answered to one customer message (recorded or replayed)."""

    customer: str
    replies: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    handoffs: int = 0
    tokens: int = 0
    cost: str | None = None
    # Replayed only: calls the recording never saw (answered with an error).
    unrecorded: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "customer": self.customer,
            "replies": self.replies,
            "tool_calls": self.tool_calls,
            "approvals": self.approvals,
            "handoffs": self.handoffs,
            "tokens": self.tokens,
            "cost": self.cost,
            "unrecorded": self.unrecorded,
        }


@dataclass(slots=True)
class Recording:
    session_id: str
    agent_name: str
    turns: list[TurnOutcome]
    # call_key -> the results it returned, in the order it returned them.
    results: dict[str, list[ToolResultData]]


def is_customer_message(message: CoreMessage) -> bool:
    return (
        message.sender == "user"
        and bool(message.text)
        and not message.tool_results
        and not message.is_compaction
        and not message.is_skill_injection
        and message.framework_context is None
    )


def outcomes_of(messages: list[CoreMessage]) -> tuple[list[TurnOutcome], dict[str, list[Any]]]:
    """The turns of a message history (one per customer message) and the results its tool
    calls returned, by `call_key`."""
    turns: list[TurnOutcome] = []
    results: dict[str, list[ToolResultData]] = {}
    calls: dict[str, tuple[str, Any]] = {}  # call id -> (tool, args)
    for message in messages:
        if is_customer_message(message):
            turns.append(TurnOutcome(customer=message.text))
            continue
        if not turns:
            continue  # a banner or a note before the first customer message
        current = turns[-1]
        if message.sender == "agent":
            if message.text:
                current.replies.append(message.text)
            for call in message.tool_calls or []:
                current.tool_calls.append({"tool": call.tool_name, "args": call.input_args})
                if call.tool_name == REQUEST_HUMAN_TOOL_NAME:
                    current.handoffs += 1
                if call.id:
                    calls[call.id] = (call.tool_name, call.input_args)
        for result in message.tool_results or []:
            tool, args = calls.get(result.call_id or "", (result.tool_name, None))
            results.setdefault(call_key(tool, args), []).append(result.result)
    return turns, results


def recording_of(session_id: str) -> Recording:
    """The session's conversation as recorded (`Session.DoesNotExist` if it is gone)."""
    found = recordings_of([session_id])
    if session_id not in found:
        raise Session.DoesNotExist(session_id)
    return found[session_id]


def recordings_of(session_ids: list[str]) -> dict[str, Recording]:
    """The conversations of these sessions as recorded, by session id (a deleted one is
    missing): four reads for the lot (sessions, messages, turns, approvals), not per
    session."""
    agents = dict(Session.objects.filter(pk__in=session_ids).values_list("pk", "agent_name"))
    history: dict[str, list[CoreMessage]] = {session_id: [] for session_id in agents}
    for row in Message.objects.filter(session_id__in=list(agents)).order_by("session_id", "seq"):
        history[row.session_id].append(message_to_core(row))
    recordings = {}
    for session_id, messages in history.items():
        turns, results = outcomes_of(messages)
        recordings[session_id] = Recording(
            session_id=session_id, agent_name=agents[session_id], turns=turns, results=results
        )
    _add_usage(recordings)
    _add_approvals(recordings)
    return recordings


def _add_usage(recordings: dict[str, Recording]) -> None:
    # A dotted lookup, not an import: the turns sit above this app.
    from django.apps import apps

    turn_model = apps.get_model("turns", "Turn")
    rows: dict[str, list[tuple[str, str, int, int]]] = {}
    for session_id, *row in (
        turn_model.objects.filter(session_id__in=list(recordings), status="done")
        .order_by("session_id", "id")
        .values_list("session_id", "text", "model", "tokens_in", "tokens_out")
    ):
        rows.setdefault(session_id, []).append(tuple(row))  # type: ignore[arg-type]
    prices = model_prices()
    for session_id, recording in recordings.items():
        unmatched = iter(rows.get(session_id, []))
        for outcome in recording.turns:
            for text, model, tokens_in, tokens_out in unmatched:
                if text == outcome.customer:
                    outcome.tokens = tokens_in + tokens_out
                    cost = total_cost([(model, Usage(tokens_in, tokens_out))], prices)
                    outcome.cost = str(cost.amount) if cost.amount is not None else None
                    break


def _add_approvals(recordings: dict[str, Recording]) -> None:
    asked = (
        ApprovalRequest.objects.filter(session_id__in=list(recordings))
        .order_by("created_at")
        .values_list("session_id", "tool_name", "args")
    )
    for session_id, tool_name, args in asked:
        call = {"tool": tool_name, "args": args}
        for outcome in recordings[session_id].turns:
            if outcome.approvals.count(tool_name) < outcome.tool_calls.count(call):
                outcome.approvals.append(tool_name)
                break
