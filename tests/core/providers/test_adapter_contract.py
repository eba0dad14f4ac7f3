"""What every model adapter does alike, run over each provider's fake server: streaming,
stopping, errors of its subscribers and of the network, and event loops."""

from __future__ import annotations

import asyncio
import socket

import pytest

from gloveapp.core.abort import AbortController
from gloveapp.core.providers.errors import ModelProviderError
from gloveapp.core.types import AbortError, Message
from tests.core.providers.conftest import ProviderCase, Recorder

ASK = [Message("user", "hi")]


async def test_it_hands_each_delta_over_and_stops_the_stream_on_abort(
    fake_provider: ProviderCase,
) -> None:
    # The server sends the first chunk and holds the stream open: the delta arrives while
    # the stream is open, and aborting closes the connection.
    fake_provider.reply_first_then_hang(["first ", "never sent"])
    model = fake_provider.model()
    controller = AbortController()
    recorder = Recorder()
    got_first_delta = asyncio.Event()

    async def notify(event_type: str, payload: dict) -> None:
        await recorder(event_type, payload)
        if event_type == "text_delta":
            got_first_delta.set()

    task = asyncio.create_task(model.prompt(ASK, None, notify, controller.signal))
    await asyncio.wait_for(got_first_delta.wait(), 5)
    controller.abort("user pressed stop")

    with pytest.raises(AbortError):
        await asyncio.wait_for(task, 5)
    assert recorder.events == [("text_delta", {"text": "first "})]
    # The SDK closed the connection: the server's next write failed.
    assert await asyncio.to_thread(fake_provider.server.client_disconnected.wait, 5)


async def test_it_sends_nothing_when_aborted_before_the_call(fake_provider: ProviderCase) -> None:
    controller = AbortController()
    controller.abort()

    with pytest.raises(AbortError):
        await fake_provider.model().prompt(ASK, None, Recorder(), controller.signal)
    assert fake_provider.server.requests == []


async def test_it_lets_a_subscriber_error_through_unchanged(fake_provider: ProviderCase) -> None:
    fake_provider.reply_text(["a", "b"])

    async def broken(event_type: str, payload: dict) -> None:
        raise RuntimeError("subscriber broke")

    with pytest.raises(RuntimeError, match="subscriber broke"):
        await fake_provider.model().prompt(ASK, None, broken)


def test_it_serves_several_event_loops(fake_provider: ProviderCase) -> None:
    # Django runs each async_to_sync call on its own loop; the adapter must not reuse a
    # connection pool bound to a closed loop.
    fake_provider.reply_text(["one"])
    fake_provider.reply_text(["two"])
    model = fake_provider.model()

    async def ask() -> str:
        result = await model.prompt(ASK, None, Recorder())
        return result.messages[0].text

    assert asyncio.run(ask()) == "one"
    assert asyncio.run(ask()) == "two"


async def test_it_reports_a_refused_connection_as_a_retryable_provider_error(
    fake_provider: ProviderCase, recorder: Recorder
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = fake_provider.model(base_url=f"http://127.0.0.1:{port}/v1")

    with pytest.raises(ModelProviderError) as caught:
        await model.prompt(ASK, None, recorder)

    assert caught.value.status is None
    assert caught.value.retryable
    assert "connection failed" in str(caught.value)
    assert recorder.events == []
