"""A client of the server's agents: start a turn, stream it, answer what it asks.

Django-free (httpx only), like `RemoteStore`: a bot, a script or another backend imports it
without the server's settings.

    from gloveapp.remote.agent_client import AgentClient

    with AgentClient("https://shop.example", token="…") as glove:
        session = glove.create_session(agent="coffee")
        turn = glove.start_turn(session, "Show me the Kenyan coffees")
        for event in glove.stream(session, since=turn["lastEventId"], until_turn=turn["turnId"]):
            if event.type == "text_delta":
                print(event.payload["text"], end="")
            elif event.type == "slot.pushed":
                for slot in glove.slots(session):
                    if slot["answeredBy"] == "owner" and not slot["expired"]:
                        glove.answer_slot(session, slot["id"], {"confirmed": True})

`AsyncAgentClient` is the same with `async`/`await` (`async for event in glove.stream(…)`).

`stream` reads the session's Server-Sent Events and resumes by itself: when the connection
drops it reconnects with the last event id it saw (`Last-Event-ID`), so every stored event
reaches the caller once and in order; a `resync` event means the client was too far behind
(reload what you show, the stream goes on from there). `until_turn` ends the stream once that
turn finished, failed or was stopped. Errors are `AgentApiError` (status, message, field;
`retry_after` for a 429 or 503).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import httpx

TURN_END_EVENTS = frozenset({"turn.finished", "turn.error", "turn.withdrawn"})
RECONNECT_DELAY_SECONDS = 0.5
MAX_RECONNECT_DELAY_SECONDS = 10.0

JsonObject = dict[str, Any]
"""A JSON object of the agent API as decoded (its fields: docs/reference/rest-api.md)."""


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a session's stream (the websocket's frame): `id` is None for transient
    events (streamed text, tool progress) and for `resync`."""

    id: int | None
    type: str
    payload: JsonObject


class AgentApiError(Exception):
    def __init__(
        self, status: int, message: str, field: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.field = field
        self.retry_after = retry_after


def _error(response: httpx.Response) -> AgentApiError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    retry = response.headers.get("Retry-After")
    return AgentApiError(
        response.status_code,
        str(body.get("error") or response.reason_phrase),
        body.get("field"),
        float(retry) if retry and retry.replace(".", "", 1).isdigit() else None,
    )


class _SseParser:
    """Server-Sent Events, line by line (the WHATWG rules this server's stream uses)."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._type = ""

    def feed(self, line: str) -> StreamEvent | None:
        if line == "":
            if not self._data:
                self._type = ""
                return None
            data, self._data, self._type = "\n".join(self._data), [], ""
            frame = cast(JsonObject, json.loads(data))
            return StreamEvent(frame.get("id"), frame["type"], frame.get("payload") or {})
        if line.startswith(":"):
            return None  # a comment: the heartbeat
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        return None


def _path(*parts: str) -> str:
    return "/".join(quote(str(part), safe="") for part in parts)


def _checked(response: httpx.Response) -> httpx.Response:
    """The response itself when it succeeded; a 4xx or 5xx raises its `AgentApiError`."""
    if response.status_code >= 400:
        raise _error(response)
    return response


def _object(response: httpx.Response) -> JsonObject:
    """The response's body, a JSON object (the agent API answers one; {} for no body)."""
    return cast(JsonObject, response.json()) if response.content else {}


def _objects(response: httpx.Response) -> list[JsonObject]:
    """The response's body, a JSON array of objects (the agent API's lists)."""
    return cast(list[JsonObject], response.json()) if response.content else []


class _Base:
    def __init__(self, base_url: str, token: str | None, stream_url: str | None) -> None:
        self.base_url = base_url.rstrip("/")
        # Where the event stream is served, when not at base_url (a server without the
        # production proxy in front: the ASGI server's own address).
        self.stream_url = (stream_url or base_url).rstrip("/")
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Token {token}"

    @staticmethod
    def _start_body(text: str, key: str | None) -> tuple[JsonObject, dict[str, str]]:
        return {"text": text}, {"Idempotency-Key": key or str(uuid.uuid4())}

    @staticmethod
    def _answer_body(value: Any, dismiss: bool) -> JsonObject:
        return {"dismiss": True} if dismiss else {"value": value}

    @staticmethod
    def _ends(event: StreamEvent, until_turn: int | None) -> bool:
        return (
            until_turn is not None
            and event.type in TURN_END_EVENTS
            and event.payload.get("turn") == until_turn
        )


class AgentClient(_Base):
    """The synchronous client (`httpx.Client`)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        stream_url: str | None = None,
        **httpx_options: Any,
    ) -> None:
        super().__init__(base_url, token, stream_url)
        self._client = httpx.Client(
            base_url=self.base_url, headers=self.headers, timeout=timeout, **httpx_options
        )

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return _checked(self._client.request(method, "/api/" + path, **kwargs))

    def create_session(
        self, *, agent: str = "", title: str = "", session_id: str | None = None
    ) -> str:
        body: dict[str, Any] = {"agentName": agent, "title": title}
        if session_id is not None:
            body["sessionId"] = session_id
        return str(_object(self._call("POST", "sessions", json=body))["sessionId"])

    def start_turn(
        self, session_id: str, text: str, *, idempotency_key: str | None = None
    ) -> JsonObject:
        """Queue a message; a retry with the same key starts no second turn."""
        body, headers = self._start_body(text, idempotency_key)
        return _object(
            self._call(
                "POST", _path("sessions", session_id, "agent", "turns"), json=body, headers=headers
            )
        )

    def turn(self, session_id: str, turn_id: int) -> JsonObject:
        return _object(
            self._call("GET", _path("sessions", session_id, "agent", "turns", str(turn_id)))
        )

    def slots(self, session_id: str) -> list[JsonObject]:
        return _objects(self._call("GET", _path("sessions", session_id, "slots")))

    def answer_slot(
        self, session_id: str, slot_id: str, value: Any = None, *, dismiss: bool = False
    ) -> None:
        """Answer a slot with `value`, or `dismiss` it: Glove's reject, the waiting tool is
        run again and may push a fresh slot (a permission prompt: a no for this call)."""
        self._call(
            "POST",
            _path("sessions", session_id, "slots", slot_id),
            json=self._answer_body(value, dismiss),
        )

    def permission_prompts(self, session_id: str) -> list[JsonObject]:
        return _objects(self._call("GET", _path("sessions", session_id, "permission-prompts")))

    def answer_permission(self, session_id: str, prompt_id: str, value: str = "once") -> None:
        self._call(
            "POST",
            _path("sessions", session_id, "permission-prompts", prompt_id),
            json={"value": value},
        )

    def stop(self, session_id: str) -> bool:
        return bool(
            _object(self._call("POST", _path("sessions", session_id, "cancel")))["cancelled"]
        )

    def decide_approval(self, approval_id: str, decision: str, **fields: Any) -> JsonObject:
        """Staff: decide an approval request (`approve`, `reject`, `edit` …)."""
        return _object(
            self._call(
                "POST",
                _path("approvals", approval_id, "decide"),
                json={"decision": decision, **fields},
            )
        )

    def stream(
        self,
        session_id: str,
        *,
        since: int | None = None,
        until_turn: int | None = None,
        reconnect: bool = True,
    ) -> Iterator[StreamEvent]:
        """The session's events from after `since` (None: from now), resuming by itself."""
        cursor, delay = since, RECONNECT_DELAY_SECONDS
        path = self.stream_url + "/api/" + _path("sessions", session_id, "events")
        while True:
            headers = {"Accept": "text/event-stream"}
            if cursor is not None:
                headers["Last-Event-ID"] = str(cursor)
            try:
                with self._client.stream(
                    "GET", path, headers=headers, timeout=httpx.Timeout(None, connect=10)
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        error = _error(response)
                        if error.status != 503 or not reconnect:
                            raise error
                        time.sleep(error.retry_after or delay)
                        continue
                    delay = RECONNECT_DELAY_SECONDS
                    parser = _SseParser()
                    for line in response.iter_lines():
                        event = parser.feed(line)
                        if event is None:
                            continue
                        if event.id is not None:
                            cursor = event.id
                        elif event.type == "resync":
                            cursor = event.payload.get("last_event_id", cursor)
                        yield event
                        if self._ends(event, until_turn) or event.type == "session.deleted":
                            return
            except (httpx.TransportError, httpx.StreamError):
                if not reconnect:
                    raise
            if not reconnect:
                return
            time.sleep(delay)  # the connection dropped: resume from the cursor
            delay = min(delay * 2, MAX_RECONNECT_DELAY_SECONDS)


class AsyncAgentClient(_Base):
    """The asynchronous client (`httpx.AsyncClient`): the same methods, awaited."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        stream_url: str | None = None,
        **httpx_options: Any,
    ) -> None:
        super().__init__(base_url, token, stream_url)
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=timeout, **httpx_options
        )

    async def __aenter__(self) -> AsyncAgentClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return _checked(await self._client.request(method, "/api/" + path, **kwargs))

    async def create_session(
        self, *, agent: str = "", title: str = "", session_id: str | None = None
    ) -> str:
        body: dict[str, Any] = {"agentName": agent, "title": title}
        if session_id is not None:
            body["sessionId"] = session_id
        return str(_object(await self._call("POST", "sessions", json=body))["sessionId"])

    async def start_turn(
        self, session_id: str, text: str, *, idempotency_key: str | None = None
    ) -> JsonObject:
        body, headers = self._start_body(text, idempotency_key)
        return _object(
            await self._call(
                "POST", _path("sessions", session_id, "agent", "turns"), json=body, headers=headers
            )
        )

    async def turn(self, session_id: str, turn_id: int) -> JsonObject:
        return _object(
            await self._call("GET", _path("sessions", session_id, "agent", "turns", str(turn_id)))
        )

    async def slots(self, session_id: str) -> list[JsonObject]:
        return _objects(await self._call("GET", _path("sessions", session_id, "slots")))

    async def answer_slot(
        self, session_id: str, slot_id: str, value: Any = None, *, dismiss: bool = False
    ) -> None:
        await self._call(
            "POST",
            _path("sessions", session_id, "slots", slot_id),
            json=self._answer_body(value, dismiss),
        )

    async def permission_prompts(self, session_id: str) -> list[JsonObject]:
        return _objects(
            await self._call("GET", _path("sessions", session_id, "permission-prompts"))
        )

    async def answer_permission(self, session_id: str, prompt_id: str, value: str = "once") -> None:
        await self._call(
            "POST",
            _path("sessions", session_id, "permission-prompts", prompt_id),
            json={"value": value},
        )

    async def stop(self, session_id: str) -> bool:
        response = await self._call("POST", _path("sessions", session_id, "cancel"))
        return bool(_object(response)["cancelled"])

    async def decide_approval(self, approval_id: str, decision: str, **fields: Any) -> JsonObject:
        return _object(
            await self._call(
                "POST",
                _path("approvals", approval_id, "decide"),
                json={"decision": decision, **fields},
            )
        )

    async def stream(
        self,
        session_id: str,
        *,
        since: int | None = None,
        until_turn: int | None = None,
        reconnect: bool = True,
    ) -> AsyncIterator[StreamEvent]:
        cursor, delay = since, RECONNECT_DELAY_SECONDS
        path = self.stream_url + "/api/" + _path("sessions", session_id, "events")
        while True:
            headers = {"Accept": "text/event-stream"}
            if cursor is not None:
                headers["Last-Event-ID"] = str(cursor)
            try:
                async with self._client.stream(
                    "GET", path, headers=headers, timeout=httpx.Timeout(None, connect=10)
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        error = _error(response)
                        if error.status != 503 or not reconnect:
                            raise error
                        await asyncio.sleep(error.retry_after or delay)
                        continue
                    delay = RECONNECT_DELAY_SECONDS
                    parser = _SseParser()
                    async for line in response.aiter_lines():
                        event = parser.feed(line)
                        if event is None:
                            continue
                        if event.id is not None:
                            cursor = event.id
                        elif event.type == "resync":
                            cursor = event.payload.get("last_event_id", cursor)
                        yield event
                        if self._ends(event, until_turn) or event.type == "session.deleted":
                            return
            except (httpx.TransportError, httpx.StreamError):
                if not reconnect:
                    raise
            if not reconnect:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RECONNECT_DELAY_SECONDS)
