"""The fake provider server, per provider or over every provider, and an event recorder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gloveapp.core.providers.anthropic import AnthropicModel
from gloveapp.core.providers.base import ModelAdapter
from gloveapp.core.providers.openai_compat import OpenAICompatModel
from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.fakes.http_fake import FakeProvider
from tests.fakes.openai_server import FakeOpenAI


class Recorder:
    """A `notify` callable that keeps every (event, payload) in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, event_type: str, payload: dict[str, Any]) -> None:
        self.events.append((event_type, payload))

    @property
    def types(self) -> list[str]:
        return [event_type for event_type, _ in self.events]

    def of(self, event_type: str) -> list[dict[str, Any]]:
        return [payload for kind, payload in self.events if kind == event_type]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@dataclass(slots=True)
class ProviderCase:
    """One provider's fake API and its adapter, for what every adapter must do alike."""

    name: str
    server: FakeProvider
    # model(base_url=None, **options): the adapter, on the fake unless told another URL.
    model: Callable[..., ModelAdapter]
    # A streamed text reply, one `text_delta` per chunk.
    reply_text: Callable[[list[str]], None]
    # A stream that sends its first chunk, then holds the connection open.
    reply_first_then_hang: Callable[[list[str]], None]


def _anthropic(server: FakeAnthropic) -> ProviderCase:
    def model(base_url: str | None = None, **options: Any) -> AnthropicModel:
        return AnthropicModel(
            "claude-test", api_key="k", base_url=base_url or server.url, max_retries=0, **options
        )

    return ProviderCase(
        name="anthropic",
        server=server,
        model=model,
        reply_text=lambda chunks: server.reply_stream([text(chunks)]),
        # message_start, ping, the block's start, its first delta.
        reply_first_then_hang=lambda chunks: server.reply_stream([text(chunks)], hang_after=4),
    )


def _openai(server: FakeOpenAI) -> ProviderCase:
    def model(base_url: str | None = None, **options: Any) -> OpenAICompatModel:
        return OpenAICompatModel(
            "gpt-test", api_key="k", base_url=base_url or server.base_url, max_retries=0, **options
        )

    return ProviderCase(
        name="openai",
        server=server,
        model=model,
        reply_text=lambda chunks: server.reply_stream(chunks),
        # The role chunk, the first delta.
        reply_first_then_hang=lambda chunks: server.reply_stream(chunks, hang_after=2),
    )


PROVIDERS: dict[str, tuple[type[FakeProvider], Callable[[Any], ProviderCase]]] = {
    "anthropic": (FakeAnthropic, _anthropic),
    "openai": (FakeOpenAI, _openai),
}


def _serving(name: str) -> Iterator[ProviderCase]:
    fake, case = PROVIDERS[name]
    with fake() as server:
        yield case(server)


@pytest.fixture(params=sorted(PROVIDERS))
def fake_provider(request: pytest.FixtureRequest) -> Iterator[ProviderCase]:
    """Each provider's fake server in turn, with its adapter: the tests every adapter passes."""
    yield from _serving(request.param)


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropic]:
    for case in _serving("anthropic"):
        yield case.server  # type: ignore[misc]


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    for case in _serving("openai"):
        yield case.server  # type: ignore[misc]
