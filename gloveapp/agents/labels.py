"""What people read of an agent's tools: their labels and a call's summary.

A tool declares both beside its logic (`Tool.label`, `Tool.summary`); the built-in tools have
labels of their own. The pages, the approvals and the transcripts ask here, with the session's
agent name, so a tool renamed or an agent removed still reads (in plain words from its name).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import get_agent_spec
from gloveapp.core.builtin_tools import BUILTIN_LABELS
from gloveapp.core.tools import CallSummary, Tool, humanize_name


def agent_tool(agent_name: str | None, tool_name: str) -> Tool | None:
    """The session's agent's tool by name, or None (an agent or tool since removed)."""
    try:
        spec = get_agent_spec(agent_name)
    except (ImproperlyConfigured, Exception):
        return None
    return next((tool for tool in spec.tools if tool.name == tool_name), None)


def tool_labels(agent_name: str | None) -> dict[str, str]:
    """Tool name -> the label a customer reads, for every tool the agent declares."""
    try:
        spec = get_agent_spec(agent_name)
    except (ImproperlyConfigured, Exception):
        return dict(BUILTIN_LABELS)
    return {**BUILTIN_LABELS, **{tool.name: tool.display_label for tool in spec.tools}}


def tool_label(agent_name: str | None, tool_name: str, labels: dict[str, str] | None = None) -> str:
    labels = labels if labels is not None else tool_labels(agent_name)
    return labels.get(tool_name) or humanize_name(tool_name or "tool")


def call_summary(agent_name: str | None, tool_name: str, args: Any) -> CallSummary | None:
    """How this call reads to people (the tool's `summary`), or None."""
    tool = agent_tool(agent_name, tool_name)
    return tool.summarize(args) if tool is not None else None
