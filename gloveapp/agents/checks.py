"""System checks for the agent settings (ids glove.E0xx), so a typo in `GLOVE_AGENTS` or a
model without its API key shows at start-up instead of in the middle of a chat."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import DEMO_PROVIDER, factory_path, load_factory, model_spec
from gloveapp.core.providers.registry import available_providers

# Providers that cannot start without a key, and where the key comes from.
API_KEY_ENV = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
NEEDS_MODEL_NAME = ("anthropic", "openai", "openrouter", "ollama")


@register("glove")
def check_agents(app_configs, **kwargs):
    agents = getattr(settings, "GLOVE_AGENTS", None)
    if not isinstance(agents, dict) or not agents:
        return [
            Error(
                "GLOVE_AGENTS must be a non-empty dict of agent name -> factory dotted path.",
                hint='For example {"coffee": "gloveapp.demo.coffee.build_agent"}.',
                id="glove.E001",
            )
        ]
    errors = []
    for name, path in agents.items():
        try:
            load_factory(name, factory_path(path))
        except ImproperlyConfigured as error:
            errors.append(
                Error(
                    str(error),
                    hint="Point it at a function returning gloveapp.agents.config.AgentSpec.",
                    id="glove.E001",
                )
            )
    default = getattr(settings, "GLOVE_DEFAULT_AGENT", "")
    if default and default not in agents:
        errors.append(
            Error(
                f"GLOVE_DEFAULT_AGENT is {default!r}, which GLOVE_AGENTS does not define.",
                hint=f"Use one of: {', '.join(sorted(agents))}.",
                id="glove.E002",
            )
        )
    return errors


@register("glove")
def check_model(app_configs, **kwargs):
    spec = model_spec()
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    if provider not in {*available_providers(), DEMO_PROVIDER}:
        return [
            Error(
                f"GLOVE_MODEL {spec!r} names an unknown model provider {provider!r}.",
                hint="Use anthropic:<model>, openai:<model>, openrouter:<model>, "
                "ollama:<model>, or leave it empty for the offline demo model.",
                id="glove.E003",
            )
        ]
    errors = []
    key_env = API_KEY_ENV.get(provider)
    if key_env and not os.environ.get(key_env, "").strip():
        errors.append(
            Error(
                f"GLOVE_MODEL is {spec!r} but {key_env} is not set.",
                hint=f"Set {key_env}, or leave GLOVE_MODEL empty for the offline demo model.",
                id="glove.E004",
            )
        )
    if provider in NEEDS_MODEL_NAME and not model.strip():
        errors.append(
            Error(
                f"GLOVE_MODEL {spec!r} does not name a model.",
                hint=f"Write it as {provider}:<model>, e.g. anthropic:claude-sonnet-4-5.",
                id="glove.E005",
            )
        )
    return errors


@register("glove")
def check_agent_extensions(app_configs, **kwargs):
    """The extensions of GLOVE_AGENTS dict entries: MCP servers well formed, subagents naming
        configured agents, hooks at known points, the handoff's keys and values (the factories are
    not run here)."""
    from gloveapp.agents.config import EXTENSION_KEYS, OPEN_TO_KEY
    from gloveapp.agents.handoff_config import handoff_from
    from gloveapp.core.hooks import HOOK_POINTS
    from gloveapp.core.mcp import McpConfigError, McpServerConfig

    agents = getattr(settings, "GLOVE_AGENTS", None)
    if not isinstance(agents, dict):
        return []
    errors = []

    def error(text: str) -> None:
        errors.append(Error(text, hint="See docs/howto/agents.md.", id="glove.E010"))

    for name, entry in agents.items():
        if not isinstance(entry, dict):
            continue
        where = f"GLOVE_AGENTS[{name!r}]"
        unknown = sorted(set(entry) - EXTENSION_KEYS - {"factory", OPEN_TO_KEY})
        if unknown:
            error(f"{where} has unknown key(s) {', '.join(unknown)}.")
        for raw in entry.get("mcp_servers") or []:
            try:
                McpServerConfig.from_mapping(raw, where=f"{where}.mcp_servers")
            except McpConfigError as problem:
                error(str(problem))
        for raw in entry.get("subagents") or []:
            agent = (
                raw if isinstance(raw, str) else (raw or {}).get("agent", (raw or {}).get("name"))
            )
            if agent not in agents:
                error(f"{where}.subagents names {agent!r}, which GLOVE_AGENTS does not define.")
        try:
            handoff_from(name, entry.get("handoff"))
        except ImproperlyConfigured as problem:
            error(str(problem))
        for key in entry.get("hooks") or {}:
            if not (isinstance(key, str) and (key.startswith("/") or key in HOOK_POINTS)):
                error(
                    f"{where}.hooks: {key!r} is neither '/name' nor one of {', '.join(HOOK_POINTS)}."
                )
    return errors


@register("glove")
def check_agent_audiences(app_configs, **kwargs):
    """Each agent's `open_to` is one of the audiences, and the default agent (the one a new
    chat on the pages opens) is open to customers."""
    from gloveapp.agents.config import AUDIENCES, agent_audience, default_agent_name

    agents = getattr(settings, "GLOVE_AGENTS", None)
    if not isinstance(agents, dict) or not agents:
        return []
    errors = []
    for name in agents:
        audience = agent_audience(name)
        if audience not in AUDIENCES:
            errors.append(
                Error(
                    f"GLOVE_AGENTS[{name!r}]['open_to'] is {audience!r}.",
                    hint=f"Use one of: {', '.join(AUDIENCES)}.",
                    id="glove.E011",
                )
            )
    default = default_agent_name()
    if default in agents and agent_audience(default) != "customers":
        errors.append(
            Error(
                f"The default agent {default!r} is open to {agent_audience(default)!r} only, "
                "but every user's new chat opens it.",
                hint="Set GLOVE_DEFAULT_AGENT to an agent open to customers.",
                id="glove.E012",
            )
        )
    return errors
