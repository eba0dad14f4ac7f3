"""The offline demo model's rules for an agent's extensions: MCP tools, subagents and skills.

A newcomer who gives the demo agent an MCP server, a subagent or a skill in `GLOVE_AGENTS`
(docs/howto/agents.md) sees each one used without a real model:

- `@name <task>` delegates the task to the subagent `name` (`glove_invoke_subagent`), as
  Glove nudges a real model to;
- "use the <name> skill" (or "skill <name>") invokes an exposed skill (`glove_invoke_skill`)
  or reads a content skill (`glove_read_skill`);
- a message that names an MCP server ("time: what time is it in Tokyo?", "ask the time
  server ...", "use time") calls that server's first tool whose name it mentions, else its
  first tool, with arguments made up from the tool's JSON schema.

Django-free, like the demo model.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.types import Message
from gloveapp.demo.demo_mesh import call_message

SUBAGENT_TOOL = "glove_invoke_subagent"
SKILL_TOOLS = ("glove_invoke_skill", "glove_read_skill")
# How glove-mcp names a server's tools: <server>__<tool>.
MCP_SEPARATOR = "__"

_MENTION = re.compile(r"(?:^|\s)@([A-Za-z0-9_-]{1,40})\b\s*(.*)", re.DOTALL)
_SKILL = re.compile(
    r"\b(?:use|read|invoke|apply)\s+(?:the\s+)?([A-Za-z0-9_-]{1,64})\s+skill\b"
    r"|\bskill\s+([A-Za-z0-9_-]{1,64})\b",
    re.IGNORECASE,
)
# Time zones the demo recognises by city, for tools that take one (mcp-server-time).
_CITY_ZONES = {
    "tokyo": "Asia/Tokyo",
    "london": "Europe/London",
    "paris": "Europe/Paris",
    "berlin": "Europe/Berlin",
    "new york": "America/New_York",
    "los angeles": "America/Los_Angeles",
    "sydney": "Australia/Sydney",
    "nairobi": "Africa/Nairobi",
}


def use_extension(text: str, tools: dict[str, ToolSpec]) -> Message | None:
    """A call to a subagent, a skill or an MCP tool the user's text asks for; None if none."""
    return _delegate(text, tools) or _use_skill(text, tools) or _use_mcp_tool(text, tools)


def describe_extension_result(name: str, data: Any) -> str | None:
    """What the demo says about an extension's result; None for the coffee tools."""
    if name == SUBAGENT_TOOL and isinstance(data, dict):
        return f"The {data.get('subagent', 'subagent')} subagent says: {data.get('content', '')}"
    if name in SKILL_TOOLS and isinstance(data, dict):
        return f"From the {data.get('skill') or data.get('name') or ''} skill: {prose(data)}"
    if MCP_SEPARATOR in name:
        server, tool = name.split(MCP_SEPARATOR, 1)
        words = tool.replace("_", " ").replace("-", " ")
        return f"The {server} server answered ({words}): {prose(data)}"
    return None


_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:\d{2}|Z)?$")


def _when(value: str) -> str:
    """An ISO timestamp as people write it: "Tuesday 1 December 2026, 21:45"."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return f"{moment:%A} {moment.day} {moment:%B %Y, %H:%M}"


def _said(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return _when(value) if _ISO_TIME.match(value) else value
    if isinstance(value, dict):
        return "; ".join(f"{_key(k)} {_said(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_said(v) for v in value)
    return str(value)


def _key(key: Any) -> str:
    return str(key).replace("_", " ").replace("-", " ").strip()


def prose(data: Any) -> str:
    """A tool's result as a sentence a customer reads: JSON (even as a string) becomes
    "timezone Asia/Tokyo; datetime Tuesday 1 December 2026, 21:45; is dst no", timestamps
    read as dates; never braces or ISO strings."""
    if isinstance(data, str):
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list):
            data = parsed
    if isinstance(data, dict) and isinstance(data.get("content"), str):
        data = data["content"]
    text = _said(data)
    return text if len(text) <= 600 else text[:600] + "…"


def _delegate(text: str, tools: dict[str, ToolSpec]) -> Message | None:
    mention = _MENTION.search(text)
    if mention is None or SUBAGENT_TOOL not in tools:
        return None
    name, task = mention[1], mention[2].strip() or text
    return call_message(SUBAGENT_TOOL, {"name": name, "prompt": task}, f"Asking @{name}.")


def _use_skill(text: str, tools: dict[str, ToolSpec]) -> Message | None:
    asked = _SKILL.search(text)
    tool = next((name for name in SKILL_TOOLS if name in tools), None)
    if asked is None or tool is None:
        return None
    name = asked[1] or asked[2]
    return call_message(tool, {"name": name}, f"Reading the {name} skill.")


def _use_mcp_tool(text: str, tools: dict[str, ToolSpec]) -> Message | None:
    lowered = text.lower()
    by_server: dict[str, list[ToolSpec]] = {}
    for name, spec in tools.items():
        if MCP_SEPARATOR in name:
            by_server.setdefault(name.split(MCP_SEPARATOR, 1)[0], []).append(spec)
    for server, specs in by_server.items():
        if not re.search(rf"(?<![\w-]){re.escape(server.lower())}(?![\w-])", lowered):
            continue
        spec = next(
            (s for s in specs if _words(s.name.split(MCP_SEPARATOR, 1)[1]) <= _words(lowered)),
            specs[0],
        )
        arguments = _arguments(spec.input_schema or {}, text)
        return call_message(spec.name, arguments, f"Asking the {server} MCP server.")
    return None


def _arguments(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """Values for the schema's required properties, from the user's text where it can."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        prop = properties.get(name) if isinstance(properties.get(name), dict) else {}
        arguments[name] = _value(name, prop, text)
    return arguments


def _value(name: str, prop: dict[str, Any], text: str) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type")
    if kind in ("integer", "number"):
        number = re.search(r"-?\d+(?:\.\d+)?", text)
        value = float(number[0]) if number else prop.get("minimum", 1)
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if "timezone" in name.lower() or "zone" in name.lower():
        lowered = text.lower()
        return next((zone for city, zone in _CITY_ZONES.items() if city in lowered), "UTC")
    return text


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")))
