"""What people read of an agent and its work: the one home of labels.

A tool declares its label and a call's summary beside its logic (`Tool.label`,
`Tool.summary`); the tools every agent may be given (the inbox, tasks, the mesh, skills,
subagents) have labels here; an MCP server's tool reads as its configured label (`labels` in
the server's entry), the tool's own `title`, else its name in words without the namespace.
An inbox item reads by its kind (`inbox_kind_label`: "Restock watch", "Roastery answered"),
never by its tag, and an agent by its title, never its internal name. The pages, the
approvals, the transcripts and the staff console ask here, with the session's agent name, so
a tool renamed or an agent removed still reads (in plain words from its name).
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import get_agent_spec
from gloveapp.core.builtin_tools import BUILTIN_LABELS
from gloveapp.core.content_skills import READ_SKILL_TOOL_NAME
from gloveapp.core.extensions import SKILL_TOOL_NAME, SUBAGENT_TOOL_NAME
from gloveapp.core.inbox_context import resolved_banner_items
from gloveapp.core.mcp.config import MCP_NAMESPACE_SEP, McpConfigError, McpServerConfig
from gloveapp.core.tools import CallSummary, Tool, humanize_name

# The tools mounted per turn rather than declared by the agent. The mesh's four names are
# its contract (spec/glove-contract.md; mesh.core.tools), written out here because the mesh
# sits above this layer; tests/agents/test_labels.py checks each is labelled.
TOOL_LABELS: dict[str, str] = {
    **BUILTIN_LABELS,
    SUBAGENT_TOOL_NAME: "Help from another agent",
    SKILL_TOOL_NAME: "A skill",
    READ_SKILL_TOOL_NAME: "A skill's instructions",
    "glove_mesh_send_message": "Message to another agent",
    "glove_mesh_broadcast": "Message to every agent",
    "glove_mesh_list_agents": "Agents on the mesh",
    "glove_mesh_acknowledge": "Acknowledgement to another agent",
    # The approval a `require_person` budget asks for (gloveapp.turns.spending.RAISE_LIMIT).
    "raise_budget_limit": "Extra spending",
}

MESH_PREFIX = "mesh:"
_MESH_WAITING = "mesh:waiting:"
_MESH_FROM = "mesh:from:"
_MESH_BROADCAST = "mesh:broadcast:"
# How a mesh item's request names the other agent: `"Roastery" (roastery)`.
_PEER = re.compile(r'"(?P<name>[^"]*)" \((?P<id>[^)]*)\)')


def _spec(agent_name: str | None) -> Any:
    try:
        return get_agent_spec(agent_name)
    except (ImproperlyConfigured, Exception):
        return None


def agent_title(agent_name: str | None) -> str:
    """The agent as people read it ("Brew"), never its internal name (`coffee`)."""
    spec = _spec(agent_name)
    title = getattr(spec, "title", "") if spec is not None else ""
    return title or humanize_name(agent_name or "") or "The agent"


def agent_tool(agent_name: str | None, tool_name: str) -> Tool | None:
    """The session's agent's tool by name, or None (an agent or tool since removed)."""
    spec = _spec(agent_name)
    if spec is None:
        return None
    return next((tool for tool in spec.tools if tool.name == tool_name), None)


def _mcp_servers(spec: Any) -> dict[str, McpServerConfig]:
    servers = {}
    for raw in getattr(spec, "mcp_servers", None) or []:
        try:
            server = McpServerConfig.from_mapping(raw)
        except McpConfigError:
            continue
        servers[server.name] = server
    return servers


def tool_labels(agent_name: str | None) -> dict[str, str]:
    """Tool name -> the label a customer reads, for every tool the agent declares."""
    spec = _spec(agent_name)
    if spec is None:
        return dict(TOOL_LABELS)
    labels = {**TOOL_LABELS, **{tool.name: tool.display_label for tool in spec.tools}}
    # An MCP server's tools are listed by the server at run time: `server__*` names are
    # read through the server's entry, whatever tools it has now.
    for server_name, server in _mcp_servers(spec).items():
        labels.update({f"{server_name}{MCP_NAMESPACE_SEP}{t}": v for t, v in server.labels.items()})
    return labels


def tool_label(agent_name: str | None, tool_name: str, labels: dict[str, str] | None = None) -> str:
    labels = labels if labels is not None else tool_labels(agent_name)
    name = tool_name or "tool"
    if name in labels:
        return labels[name]
    server, sep, tool = name.partition(MCP_NAMESPACE_SEP)
    if sep and tool:
        # An MCP tool without a configured label: its name in words, without the namespace.
        return McpServerConfig(name=server, command="-").tool_label(tool)
    return humanize_name(name)


def shown_tool_label(tool: Tool | None, tool_name: str) -> str:
    """A running call's label, from the tool the turn holds (an MCP tool's title included)."""
    label = tool.label if tool is not None else None
    return label or tool_label(None, tool_name, TOOL_LABELS)


def call_summary(agent_name: str | None, tool_name: str, args: Any) -> CallSummary | None:
    """How this call reads to people (the tool's `summary`), or None."""
    tool = agent_tool(agent_name, tool_name)
    return tool.summarize(args) if tool is not None else None


def peer_name(request: str, fallback: str = "another agent") -> str:
    """The other agent as a mesh item's request names it (`"Roastery" (roastery)`)."""
    match = _PEER.search(request or "")
    return (match["name"] or humanize_name(match["id"])) if match else fallback


def is_mesh_tag(tag: str) -> bool:
    return (tag or "").startswith(MESH_PREFIX)


def inbox_kind_label(tag: str, request: str = "", *, answered: bool = True) -> str:
    """An inbox item's kind in words: "Restock watch", "Task", "Roastery answered",
    "Message from Roastery", "Broadcast from Roastery"; never the tag itself."""
    tag = tag or ""
    if tag.startswith(_MESH_WAITING):
        peer = peer_name(request, "Another agent")
        if request.startswith("Broadcast "):
            return "Answer to the broadcast" if answered else "Broadcast sent"
        return f"{peer[:1].upper()}{peer[1:]} answered" if answered else f"Waiting for {peer}"
    if tag.startswith(_MESH_BROADCAST):
        sender = tag.rsplit(":", 1)[-1]
        return f"Broadcast from {peer_name(request, humanize_name(sender))}"
    if tag.startswith(_MESH_FROM):
        peer = peer_name(request, humanize_name(tag[len(_MESH_FROM) :]))
        if request.startswith("Acknowledgement from"):
            return f"{peer} acknowledged"
        return f"{peer} answered" if "(replying to " in request else f"Message from {peer}"
    if tag.startswith(MESH_PREFIX):
        return "Message from another agent"
    return humanize_name(tag) or "Follow-up"


def banner_answers(text: str) -> list[tuple[str, str]]:
    """("Restock watch", "Back in stock") for each item of an "[Inbox: N item(s) resolved]"
    banner, or []: what pages show a person instead of the banner's raw text. A mesh reply
    resolves the wait it answers with the same text: the answer shows once."""
    items = resolved_banner_items(text)
    replies = {response for tag, _, response in items if not tag.startswith(_MESH_WAITING)}
    return [
        (_answered(tag, inbox_kind_label(tag, request)), response)
        for tag, request, response in items
        if not (tag.startswith(_MESH_WAITING) and response in replies)
    ]


def _answered(tag: str, kind: str) -> str:
    # A mesh item's kind says who spoke ("Roastery answered"); the app's own say it here.
    return kind if is_mesh_tag(tag) else f"{kind} answered"
