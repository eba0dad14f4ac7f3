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
