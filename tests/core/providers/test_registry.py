"""get_model("provider:model") and provider registration."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gloveapp.core.providers.anthropic import AnthropicModel
from gloveapp.core.providers.errors import ModelConfigurationError
from gloveapp.core.providers.openai_compat import OpenAICompatModel
from gloveapp.core.providers.registry import (
    OLLAMA_BASE_URL,
    OPENROUTER_BASE_URL,
    available_providers,
    get_model,
    register_model_provider,
    unregister_model_provider,
)
from gloveapp.core.types import Message
from tests.core.providers.conftest import Recorder
from tests.fakes.openai_server import FakeOpenAI

ENV_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
    "OPENROUTER_BASE_URL",
    "OLLAMA_API_KEY",
    "OLLAMA_BASE_URL",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def demo_provider() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    built: list[tuple[str, dict[str, Any]]] = []

    class Demo:
        def __init__(self, model: str) -> None:
            self.name = f"testprov:{model or 'default'}"

        def set_system_prompt(self, text: str) -> None:
            pass

        async def prompt(self, messages, tools, notify, abort=None):  # pragma: no cover
            raise NotImplementedError

    def factory(model: str, **kwargs: Any) -> Demo:
        built.append((model, kwargs))
        return Demo(model)

    register_model_provider("testprov", factory)
    yield built
    unregister_model_provider("testprov")


def test_anthropic_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.local")

    model = get_model("anthropic:claude-sonnet-4-5", max_tokens=1024, stream=False)

    assert isinstance(model, AnthropicModel)
    assert (model.name, model.model, model.max_tokens, model.stream) == (
        "anthropic:claude-sonnet-4-5",
        "claude-sonnet-4-5",
        1024,
        False,
    )
    assert model.base_url == "http://proxy.local"


@pytest.mark.parametrize(
    ("spec", "env_var"),
    [
        ("anthropic:claude-x", "ANTHROPIC_API_KEY"),
        ("openai:gpt-x", "OPENAI_API_KEY"),
        ("openrouter:anthropic/claude-x", "OPENROUTER_API_KEY"),
    ],
)
def test_missing_api_key_names_the_variable(spec: str, env_var: str) -> None:
    with pytest.raises(ValueError, match=env_var):
        get_model(spec)


def test_api_key_argument_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    model = get_model("openai:gpt-x", api_key="explicit")
    assert isinstance(model, OpenAICompatModel)
    assert model.name == "openai:gpt-x"


def test_openrouter_and_ollama_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-key")
    router = get_model("openrouter:anthropic/claude-sonnet-4")
    assert isinstance(router, OpenAICompatModel)
    assert (router.name, router.model, router.base_url) == (
        "openrouter:anthropic/claude-sonnet-4",
        "anthropic/claude-sonnet-4",
        OPENROUTER_BASE_URL,
    )

    local = get_model("ollama:llama3.2")  # no key needed
    assert (local.name, local.base_url) == ("ollama:llama3.2", OLLAMA_BASE_URL)
    assert OLLAMA_BASE_URL == "http://127.0.0.1:11434/v1"
    assert OPENROUTER_BASE_URL == "https://openrouter.ai/api/v1"


async def test_openai_spec_reaches_the_configured_server(
    monkeypatch: pytest.MonkeyPatch, openai_server: FakeOpenAI, recorder: Recorder
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.reply_stream(["hello"])

    model = get_model("openai:gpt-test", max_retries=0)
    result = await model.prompt([Message("user", "hi")], None, recorder)

    assert result.messages[0].text == "hello"
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-env"
    assert openai_server.bodies[0]["model"] == "gpt-test"


def test_unknown_provider() -> None:
    with pytest.raises(ValueError, match="unknown model provider 'gemini'"):
        get_model("gemini:pro")
    with pytest.raises(ModelConfigurationError):
        get_model("gemini:pro")


def test_missing_model_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with pytest.raises(ValueError, match="anthropic:<model>"):
        get_model("anthropic")


def test_scripted_model() -> None:
    from gloveapp.core.providers.scripted import ScriptedModel

    model = get_model("scripted")
    assert isinstance(model, ScriptedModel)


def test_registered_provider(demo_provider: list[tuple[str, dict[str, Any]]]) -> None:
    assert "testprov" in available_providers()
    assert get_model("testprov").name == "testprov:default"
    assert get_model("testprov:coffee", speed=2).name == "testprov:coffee"
    assert demo_provider == [("", {}), ("coffee", {"speed": 2})]

    with pytest.raises(ValueError, match="already registered"):
        register_model_provider("testprov", lambda model, **kw: None)
    with pytest.raises(ValueError, match="already registered"):
        register_model_provider("anthropic", lambda model, **kw: None)


def test_invalid_provider_name() -> None:
    with pytest.raises(ValueError):
        register_model_provider("a:b", lambda model, **kw: None)
