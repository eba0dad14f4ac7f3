"""Which agents exist and which model they talk to, from settings.

    GLOVE_AGENTS = {"coffee": "gloveapp.demo.coffee.build_agent"}   # name -> factory
    GLOVE_MODEL = "anthropic:claude-sonnet-4-5"   # or "openai:gpt-4o-mini"; "" = offline demo

A factory takes no arguments and returns an `AgentSpec` (or a mapping with the same keys):
the tools and the system prompt of one kind of conversation. A session names its agent in
`Session.agent_name`; an empty name means `GLOVE_DEFAULT_AGENT`.

An entry may also be a dict: the factory under "factory", and the agent's extensions beside
it, added to what the factory returns (docs/howto/agents.md):

    GLOVE_AGENTS = {"coffee": {
        "factory": "gloveapp.demo.coffee.build_agent",
        "model": "anthropic:claude-haiku-4-5",                 # else GLOVE_MODEL
        "mcp_servers": [{"name": "time", "command": "mcp-server-time"}],
        "subagents": [{"name": "roaster", "agent": "roastery", "description": "..."}],
        "skills": [{"name": "brew-guide", "content": "...", "expose_to_agent": True}],
        "content_skills": [{"name": "latte-art", "description": "...", "content": "..."}],
        "hooks": {"/hook-name": "dotted.path.to.handler",
                  "before_model": [...], "after_tool": [...]},
        "handoff": {"group": "baristas", "after_failed_turns": 3},  # a person can take over
        "open_to": "customers",        # who may start a chat with it (below)
    }}

Who may start a chat with an agent (a new session on the pages, `POST /api/sessions`, a turn
over REST) is the entry's `"open_to"`: "customers" (anyone logged in; the default),
"staff" (`is_staff` users only) or "mesh" (no person: only the mesh and the runtime reach it,
as the demo's roastery). `agent_may_start` is the one rule every edge asks.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from gloveapp.core.providers.base import ModelAdapter
from gloveapp.core.providers.registry import get_model, register_model_provider
from gloveapp.core.tools import Tool
from gloveapp.observe.cost import Price, parse_prices

DEMO_PROVIDER = "demo"
# The offline demo model (a dotted path: the demo app sits above this registry).
DEMO_MODEL_CLASS = "gloveapp.demo.demo_model.DemoModel"
DEFAULT_COMPACTION_INSTRUCTIONS = (
    "Summarize the conversation. Preserve key context, decisions, and state."
)
DEMO_MODEL_LABEL = "Offline demo model (rule-based, not an AI)"


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One configured agent: what it is called, what it is told and what it can do."""

    name: str
    title: str
    system_prompt: str
    tools: list[Tool] = field(default_factory=list)
    compaction_instructions: str = DEFAULT_COMPACTION_INSTRUCTIONS
    # A "provider:model" spec for this agent alone; empty: GLOVE_MODEL.
    model: str = ""
    # Keyword arguments for the model's adapter (an agent version's model settings).
    model_settings: dict[str, Any] = field(default_factory=dict)
    # Extensions (docs/howto/agents.md): MCP servers whose tools it may call, agents it may
    # delegate to, skills, content skills and hooks; validated by `gloveapp.agents.extensions`.
    mcp_servers: list[Any] = field(default_factory=list)
    subagents: list[Any] = field(default_factory=list)
    skills: list[Any] = field(default_factory=list)
    content_skills: list[Any] = field(default_factory=list)
    hooks: dict[str, Any] = field(default_factory=dict)
    # Handing the chat to a person (`agents.handoff_config`): {"group": "baristas",
    # "after_failed_turns": 3}; empty: off (no `glove_request_human`, no rule).
    handoff: dict[str, Any] = field(default_factory=dict)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)


def agent_names() -> list[str]:
    return list(_agents_setting())


# -- who may start a chat with which agent -----------------------------------------------------
OPEN_TO_KEY = "open_to"
AUDIENCES = ("customers", "staff", "mesh")
DEFAULT_AUDIENCE = "customers"


class AgentNotStartable(ValueError):
    """The caller may not start a chat with this agent (unknown, staff only, or mesh only).

    One text for every reason: a customer learns nothing about agents they may not open."""

    field = "agentName"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"No agent you may start a chat with is called {name!r}.")


def agent_audience(name: str) -> str | None:
    """Who may start a chat with the agent `name` ("customers", "staff" or "mesh"); None
    when GLOVE_AGENTS does not define it."""
    agents = _agents_setting()
    if name not in agents:
        return None
    entry = agents[name]
    if isinstance(entry, Mapping):
        return entry.get(OPEN_TO_KEY, DEFAULT_AUDIENCE)
    return DEFAULT_AUDIENCE


def agent_may_start(name: str, user: Any) -> bool:
    """Whether `user` may start a chat with the agent `name` (empty: the default agent)."""
    audience = agent_audience(name or default_agent_name())
    if audience == "customers":
        return bool(getattr(user, "is_authenticated", False))
    if audience == "staff":
        return bool(getattr(user, "is_staff", False) and user.is_authenticated)
    return False  # mesh only, unknown, or a misconfigured audience (glove.E011)


def startable_agent(name: str, user: Any) -> str:
    """The agent `name` (empty: the default) when `user` may start a chat with it, else
    `AgentNotStartable`; returns the name a session stores (empty stays empty)."""
    if not agent_may_start(name, user):
        raise AgentNotStartable(name or default_agent_name())
    return name


def startable_agent_names(user: Any) -> list[str]:
    return [name for name in _agents_setting() if agent_may_start(name, user)]


def default_agent_name() -> str:
    return getattr(settings, "GLOVE_DEFAULT_AGENT", "") or next(iter(_agents_setting()), "")


def get_agent_spec(name: str | None = None) -> AgentSpec:
    """The agent `name` (empty: the default), built by its configured factory.

    Raises ImproperlyConfigured, naming the setting, for an unknown name or a factory that
    cannot be imported or does not return an agent.
    """
    agents = _agents_setting()
    name = name or default_agent_name()
    if name not in agents:
        known = ", ".join(sorted(agents)) or "none"
        raise ImproperlyConfigured(
            f"Unknown agent {name!r}: GLOVE_AGENTS defines {known}. Add it to GLOVE_AGENTS or "
            "set GLOVE_DEFAULT_AGENT to one of them."
        )
    entry = agents[name]
    extensions: dict[str, Any] = {}
    if isinstance(entry, Mapping):
        extensions = dict(entry)
        entry = extensions.pop("factory", None)
        extensions.pop(OPEN_TO_KEY, None)  # who may start it, not what it is
        unknown = sorted(set(extensions) - EXTENSION_KEYS)
        if unknown:
            raise ImproperlyConfigured(
                f"GLOVE_AGENTS[{name!r}] has unknown key(s) {', '.join(unknown)}; "
                f"known: factory, {OPEN_TO_KEY}, {', '.join(sorted(EXTENSION_KEYS))}."
            )
    factory = load_factory(name, entry)
    try:
        produced = factory()
    except Exception as error:
        raise ImproperlyConfigured(
            f"GLOVE_AGENTS[{name!r}] factory {entry!r} failed: {error}"
        ) from error
    spec = _as_spec(name, entry, produced)
    return _with_extensions(spec, extensions) if extensions else spec


EXTENSION_KEYS = frozenset(
    {"model", "mcp_servers", "subagents", "skills", "content_skills", "hooks", "handoff"}
)


def _with_extensions(spec: AgentSpec, extensions: dict[str, Any]) -> AgentSpec:
    """The spec with the settings' extensions added to the factory's own."""
    changes: dict[str, Any] = {}
    for key, value in extensions.items():
        if key == "model":
            if not isinstance(value, str):
                raise ImproperlyConfigured(
                    f"GLOVE_AGENTS[{spec.name!r}]['model'] must be a 'provider:model' string."
                )
            changes["model"] = value
        elif key == "handoff":
            if not isinstance(value, Mapping):
                raise ImproperlyConfigured(
                    f"GLOVE_AGENTS[{spec.name!r}]['handoff'] must be a dict."
                )
            changes["handoff"] = dict(value)
        elif key == "hooks":
            if not isinstance(value, Mapping):
                raise ImproperlyConfigured(f"GLOVE_AGENTS[{spec.name!r}]['hooks'] must be a dict.")
            changes["hooks"] = {**spec.hooks, **value}
        else:
            if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
                raise ImproperlyConfigured(f"GLOVE_AGENTS[{spec.name!r}][{key!r}] must be a list.")
            changes[key] = [*getattr(spec, key), *value]
    return replace(spec, **changes)


def factory_path(entry: Any) -> Any:
    """The factory's dotted path of a GLOVE_AGENTS entry (a path, or a dict with "factory")."""
    return entry.get("factory") if isinstance(entry, Mapping) else entry


def load_factory(name: str, path: Any) -> Any:
    if not isinstance(path, str) or "." not in path:
        raise ImproperlyConfigured(
            f"GLOVE_AGENTS[{name!r}] must be a dotted path to a factory, got {path!r}."
        )
    try:
        factory = import_string(path)
    except ImportError as error:
        raise ImproperlyConfigured(
            f"GLOVE_AGENTS[{name!r}] = {path!r} cannot be imported: {error}"
        ) from error
    if not callable(factory):
        raise ImproperlyConfigured(f"GLOVE_AGENTS[{name!r}] = {path!r} is not callable.")
    return factory


def _as_spec(name: str, path: str, produced: Any) -> AgentSpec:
    if isinstance(produced, Mapping):
        try:
            produced = AgentSpec(
                name=name,
                title=produced.get("title", name),
                system_prompt=produced["system_prompt"],
                tools=list(produced.get("tools", [])),
                compaction_instructions=produced.get(
                    "compaction_instructions", DEFAULT_COMPACTION_INSTRUCTIONS
                ),
                **{key: produced[key] for key in EXTENSION_KEYS if key in produced},
            )
        except KeyError as error:
            raise ImproperlyConfigured(
                f"GLOVE_AGENTS[{name!r}] factory {path!r} returned no {error.args[0]!r}."
            ) from None
    if not isinstance(produced, AgentSpec):
        raise ImproperlyConfigured(
            f"GLOVE_AGENTS[{name!r}] factory {path!r} must return an AgentSpec or a mapping, "
            f"got {type(produced).__name__}."
        )
    if not all(isinstance(t, Tool) for t in produced.tools):
        raise ImproperlyConfigured(
            f"GLOVE_AGENTS[{name!r}] factory {path!r} returned tools that are not Tool objects "
            "(decorate them with gloveapp.core.tools.tool)."
        )
    # The settings key is the agent's name, whatever the factory called it.
    return produced if produced.name == name else replace(produced, name=name)


def _agents_setting() -> dict[str, Any]:
    agents = getattr(settings, "GLOVE_AGENTS", None) or {}
    if not isinstance(agents, Mapping):
        raise ImproperlyConfigured("GLOVE_AGENTS must be a dict of name -> dotted factory path.")
    return dict(agents)


# -- the model ---------------------------------------------------------------------------------
def register_demo_model() -> None:
    """Make `get_model("demo")` build the offline demo model (idempotent)."""
    # A dotted path, not an import: the registry sits below the demo app it can load.
    demo_model = import_string(DEMO_MODEL_CLASS)
    register_model_provider(DEMO_PROVIDER, lambda model="", **kwargs: demo_model(), replace=True)


def model_spec() -> str:
    """`GLOVE_MODEL`, or the offline demo model when it is empty."""
    return (getattr(settings, "GLOVE_MODEL", "") or "").strip() or DEMO_PROVIDER


# Providers reached over HTTP: building one costs an SDK client (TLS context, connection
# pool) that is worth keeping between turns.
NETWORK_PROVIDERS = frozenset({"anthropic", "openai", "openrouter", "ollama"})
_shared_adapters: dict[tuple[str, str, str], ModelAdapter] = {}


def configured_model(
    agent: str | None = None,
    *,
    spec: str = "",
    model_settings: Mapping[str, Any] | None = None,
) -> ModelAdapter:
    """The adapter for one turn (`spec`: the agent's own model, else GLOVE_MODEL).

    Adapters keep the system prompt as state, so by default each call builds a fresh one.
    With `agent`, a network adapter is shared by that agent's turns: they all set the same
    system prompt, and its SDK client and connections are reused instead of rebuilt per turn.
    `model_settings` are the adapter's keyword arguments (an agent version's model settings).
    """
    register_demo_model()
    spec = spec.strip() or model_spec()
    kwargs = dict(model_settings or {})
    if agent is None or spec.partition(":")[0].strip().lower() not in NETWORK_PROVIDERS:
        return get_model(spec, **kwargs)
    key = (spec, agent, json.dumps(kwargs, sort_keys=True, default=str))
    adapter = _shared_adapters.get(key)
    if adapter is None:
        adapter = _shared_adapters[key] = get_model(spec, **kwargs)
    return adapter


def model_label() -> str:
    """How the pages name the model the agents talk to."""
    spec = model_spec()
    if spec.partition(":")[0].strip().lower() == DEMO_PROVIDER:
        return DEMO_MODEL_LABEL
    return spec


@functools.cache
def _parsed_prices(raw: str) -> dict[str, Price]:
    try:
        return parse_prices(json.loads(raw))
    except ValueError:
        return {}  # the system check (glove.E020) says why; nothing is priced meanwhile


def model_prices() -> dict[str, Price]:
    """GLOVE_MODEL_PRICES as a price table (parsed once per value); an invalid table prices
    nothing, so every cost reads "unknown" until it is fixed."""
    raw = getattr(settings, "GLOVE_MODEL_PRICES", None) or {}
    try:
        key = json.dumps(raw, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return {}
    return _parsed_prices(key)
