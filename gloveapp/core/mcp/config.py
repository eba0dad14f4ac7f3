"""Where an agent's MCP servers are and how to reach them (an entry of `mcp_servers`).

    {"name": "time", "command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}
    {"name": "docs", "url": "https://mcp.example.com/mcp",
     "headers": {"Authorization": "Bearer $DOCS_TOKEN"}, "timeout": 20}

A server with `url` is reached over streamable HTTP, one with `command` is started as a
child process and spoken to over stdio. `$NAME` / `${NAME}` in a header value or an
environment value is read from the environment when the server is connected, so secrets
stay out of settings files. `name` is the namespace of its tools: `time__get_current_time`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# glove-mcp's namespace separator: regex-safe across every model provider.
MCP_NAMESPACE_SEP = "__"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_ENV_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")

DEFAULT_CALL_TIMEOUT_SECONDS = 30.0
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0

Permission = Literal["auto", "always", "never"]


class McpConfigError(ValueError):
    """An `mcp_servers` entry that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    name: str
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    # Seconds one tool call may take before the model reads a timeout error.
    timeout: float = DEFAULT_CALL_TIMEOUT_SECONDS
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    # Un-namespaced names of the server's tools never offered to the model.
    exclude_tools: tuple[str, ...] = ()
    # "auto" as glove-mcp: a prompt unless the tool is annotated read-only.
    permission: Permission = "auto"
    # Un-namespaced tool name -> what people read for it (over the tool's own `title`).
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> Literal["http", "stdio"]:
        return "http" if self.url else "stdio"

    def resolved_headers(self) -> dict[str, str]:
        return {key: expand_env(value) for key, value in self.headers.items()}

    def resolved_env(self) -> dict[str, str]:
        return {key: expand_env(value) for key, value in self.env.items()}

    def fingerprint(self) -> tuple[Any, ...]:
        """What identifies the server for the tool-list cache (secrets unresolved)."""
        return (
            self.name,
            self.url,
            tuple(sorted(self.headers.items())),
            self.command,
            self.args,
            tuple(sorted(self.env.items())),
            self.cwd,
        )

    @classmethod
    def from_mapping(cls, raw: Any, *, where: str = "mcp_servers") -> McpServerConfig:
        if isinstance(raw, McpServerConfig):
            return raw
        if not isinstance(raw, Mapping):
            raise McpConfigError(f"{where}: each server is a dict, got {type(raw).__name__}")
        known = {
            "name", "url", "headers", "command", "args", "env", "cwd", "timeout",
            "connect_timeout", "exclude_tools", "permission", "labels",
        }  # fmt: skip
        unknown = sorted(set(raw) - known)
        if unknown:
            raise McpConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
        name = raw.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise McpConfigError(f"{where}.name: 1-40 letters, digits, '_' or '-', got {name!r}")
        where = f"{where}[{name}]"
        url, command = raw.get("url"), raw.get("command")
        if bool(url) == bool(command):
            raise McpConfigError(f"{where}: give exactly one of url (HTTP) or command (stdio)")
        if url is not None and (
            not isinstance(url, str) or not url.startswith(("http://", "https://"))
        ):
            raise McpConfigError(f"{where}.url: an http:// or https:// URL, got {url!r}")
        if command is not None and not isinstance(command, str):
            raise McpConfigError(f"{where}.command: a string, got {command!r}")
        permission = raw.get("permission", "auto")
        if permission not in ("auto", "always", "never"):
            raise McpConfigError(f"{where}.permission: auto, always or never, got {permission!r}")
        return cls(
            name=name,
            url=url,
            headers=_str_map(raw.get("headers"), f"{where}.headers"),
            command=command,
            args=_str_tuple(raw.get("args"), f"{where}.args"),
            env=_str_map(raw.get("env"), f"{where}.env"),
            cwd=raw.get("cwd"),
            timeout=_positive(raw.get("timeout", DEFAULT_CALL_TIMEOUT_SECONDS), f"{where}.timeout"),
            connect_timeout=_positive(
                raw.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT_SECONDS),
                f"{where}.connect_timeout",
            ),
            exclude_tools=_str_tuple(raw.get("exclude_tools"), f"{where}.exclude_tools"),
            permission=permission,
            labels=_str_map(raw.get("labels"), f"{where}.labels"),
        )

    def tool_label(self, tool: str, title: str | None = None) -> str:
        """What people read for this server's `tool`: its configured label, the tool's own
        title, else its name in words without the server's namespace ("Get current time")."""
        label = self.labels.get(tool) or title
        if label:
            return label
        words = tool.replace("_", " ").replace("-", " ").split()
        return " ".join(words).capitalize() if words else tool


def expand_env(value: str) -> str:
    """`$NAME` and `${NAME}` replaced by the environment's value ("" when unset)."""
    return _ENV_REFERENCE.sub(lambda m: os.environ.get(m.group(1) or m.group(2), ""), value)


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise McpConfigError(f"{where}: a dict of strings")
    return dict(value)


def _str_tuple(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f"{where}: a list of strings")
    return tuple(value)


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise McpConfigError(f"{where}: a positive number of seconds, got {value!r}")
    return float(value)
