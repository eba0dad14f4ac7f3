"""Build a model adapter from a `provider:model` string, e.g. `anthropic:claude-sonnet-4-5`.

Credentials come from the environment (or keyword arguments). Extra providers, such as the
Django layer's offline `demo` model, are added with `register_model_provider`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gloveapp.core.providers.base import ModelAdapter
from gloveapp.core.providers.errors import ModelConfigurationError

# factory(model_name, **kwargs) -> adapter; model_name is "" for a bare spec like "scripted".
ModelFactory = Callable[..., ModelAdapter]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _require_key(kwargs: dict[str, Any], env_var: str, provider: str) -> str:
    key = kwargs.pop("api_key", None) or _env(env_var)
    if not key:
        raise ModelConfigurationError(
            f"the {provider} model needs an API key: set {env_var} or pass api_key="
        )
    return key


def _require_model(model: str, provider: str) -> str:
    if not model:
        raise ModelConfigurationError(f"name the model: '{provider}:<model>'")
    return model


def _anthropic(model: str, **kwargs: Any) -> ModelAdapter:
    from gloveapp.core.providers.anthropic import AnthropicModel

    api_key = _require_key(kwargs, "ANTHROPIC_API_KEY", "anthropic")
    kwargs.setdefault("base_url", _env("ANTHROPIC_BASE_URL"))
    return AnthropicModel(_require_model(model, "anthropic"), api_key=api_key, **kwargs)


def _openai(model: str, **kwargs: Any) -> ModelAdapter:
    from gloveapp.core.providers.openai_compat import OpenAICompatModel

    api_key = _require_key(kwargs, "OPENAI_API_KEY", "openai")
    kwargs.setdefault("base_url", _env("OPENAI_BASE_URL"))
    kwargs.setdefault("provider", "openai")
    return OpenAICompatModel(_require_model(model, "openai"), api_key=api_key, **kwargs)


def _openrouter(model: str, **kwargs: Any) -> ModelAdapter:
    from gloveapp.core.providers.openai_compat import OpenAICompatModel

    api_key = _require_key(kwargs, "OPENROUTER_API_KEY", "openrouter")
    kwargs.setdefault("base_url", _env("OPENROUTER_BASE_URL") or OPENROUTER_BASE_URL)
    kwargs.setdefault("provider", "openrouter")
    return OpenAICompatModel(_require_model(model, "openrouter"), api_key=api_key, **kwargs)


def _ollama(model: str, **kwargs: Any) -> ModelAdapter:
    from gloveapp.core.providers.openai_compat import OpenAICompatModel

    # Ollama ignores the key, but the SDK refuses to start without one.
    api_key = kwargs.pop("api_key", None) or _env("OLLAMA_API_KEY") or "ollama"
    kwargs.setdefault("base_url", _env("OLLAMA_BASE_URL") or OLLAMA_BASE_URL)
    kwargs.setdefault("provider", "ollama")
    return OpenAICompatModel(_require_model(model, "ollama"), api_key=api_key, **kwargs)


def _scripted(model: str, **kwargs: Any) -> ModelAdapter:
    # Imported lazily: the scripted model lives in its own module and is optional here.
    from gloveapp.core.providers.scripted import ScriptedModel

    if model:
        kwargs.setdefault("label", model)
    return ScriptedModel(kwargs.pop("script", []), **kwargs)


_BUILTIN: dict[str, ModelFactory] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "openrouter": _openrouter,
    "ollama": _ollama,
    "scripted": _scripted,
}
_registered: dict[str, ModelFactory] = {}


def register_model_provider(name: str, factory: ModelFactory, *, replace: bool = False) -> None:
    """Make `get_model("<name>:<model>")` (or a bare `"<name>"`) call `factory(model, **kwargs)`."""
    if not name or ":" in name:
        raise ValueError(f"invalid provider name {name!r}")
    if not replace and (name in _registered or name in _BUILTIN):
        raise ValueError(f"model provider {name!r} is already registered")
    _registered[name] = factory


def unregister_model_provider(name: str) -> None:
    _registered.pop(name, None)


def available_providers() -> list[str]:
    return sorted({*_BUILTIN, *_registered})


def get_model(spec: str, **kwargs: Any) -> ModelAdapter:
    """`"anthropic:<model>"`, `"openai:<model>"`, `"openrouter:<model>"`, `"ollama:<model>"`,
    `"scripted"`, or any registered provider. Keyword arguments go to the adapter."""
    provider, _, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    factory = _registered.get(provider) or _BUILTIN.get(provider)
    if factory is None:
        raise ModelConfigurationError(
            f"unknown model provider {provider!r} in {spec!r}; "
            f"known providers: {', '.join(available_providers())}"
        )
    return factory(model.strip(), **kwargs)
