"""`RemoteStore`: the runtime's store protocol over the REST remote store, for an agent in
another process (or on another machine).

It is the Python counterpart of glove-react's `createRemoteStore` wired to this server's
routes, with two differences: every capability is remote (nothing falls back to memory),
and the server's errors come back as the runtime's exceptions (`DuplicateInboxItem`,
`InboxItemNotFound`, `InboxTransitionError`), so it behaves like `MemoryStore`.

Django-free on purpose: it needs only httpx and `gloveapp.core`.

    store = await RemoteStore.create("http://127.0.0.1:8000", token, title="Coffee")
    agent = Glove(store=store, model=model, ...).build()
    ...
    await store.aclose()
"""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import quote

import httpx

from gloveapp.core.store import (
    DuplicateInboxItem,
    InboxItemNotFound,
    InboxTransitionError,
    StoreError,
)
from gloveapp.core.types import InboxItem, Message, PermissionStatus, Task, TokenUsage


class RemoteStoreError(StoreError):
    """The server refused a request for a reason the runtime has no exception for."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        self.status = status
        self.body = body
        super().__init__(f"{status}: {message}")


class RemoteStore:
    """A `StoreAdapter` (with tasks, permissions and the inbox) backed by `/api/sessions/<id>`."""

    def __init__(
        self,
        base_url: str,
        token: str,
        session_id: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.identifier = session_id
        self.base_url = base_url.rstrip("/")
        self.session_url = f"{self.base_url}/api/sessions/{quote(session_id, safe='')}"
        self._client = httpx.AsyncClient(
            base_url=self.session_url,
            headers={"Authorization": f"Token {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    @classmethod
    async def create(
        cls,
        base_url: str,
        token: str,
        session_id: str | None = None,
        *,
        title: str = "",
        agent_name: str = "",
        **kwargs: Any,
    ) -> RemoteStore:
        """Create a session owned by the token's user and return a store on it."""
        body: dict[str, Any] = {"title": title, "agentName": agent_name}
        if session_id is not None:
            body["sessionId"] = session_id
        async with httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Token {token}"},
            timeout=kwargs.get("timeout", 30.0),
            transport=kwargs.get("transport"),
        ) as client:
            response = await client.post("/api/sessions", json=body)
        _raise_for_error(response)
        return cls(base_url, token, response.json()["sessionId"], **kwargs)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def delete_session(self) -> None:
        """Delete the session and everything in it (messages, tasks, inbox items)."""
        # Absolute: httpx gives a base URL a trailing slash, which this route does not have.
        response = await self._client.delete(self.session_url)
        if response.status_code != 404:  # already gone is what the caller wanted
            _raise_for_error(response)

    async def __aenter__(self) -> RemoteStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._client.request(method, path, **kwargs)
        _raise_for_error(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # -- messages and counters ------------------------------------------------------------
    async def get_messages(self) -> list[Message]:
        return [Message.from_dict(m) for m in await self._call("GET", "/messages")]

    async def get_context_messages(self) -> list[Message]:
        data = await self._call("GET", "/messages", params={"since_compaction": "1"})
        return [Message.from_dict(m) for m in data]

    async def append_messages(self, messages: list[Message]) -> None:
        if messages:
            body = {"messages": [_sendable(m) for m in messages]}
            await self._call("POST", "/messages", json=body)

    async def get_token_count(self) -> int:
        return int((await self._call("GET", "/tokens"))["token_count"])

    async def add_tokens(self, usage: TokenUsage) -> None:
        await self._call("POST", "/tokens", json=usage.to_dict())

    async def get_token_consumption(self) -> TokenUsage:
        consumption = (await self._call("GET", "/tokens"))["consumption"]
        return TokenUsage(**consumption)

    async def get_turn_count(self) -> int:
        return int((await self._call("GET", "/turns"))["turn_count"])

    async def increment_turn(self) -> None:
        await self._call("POST", "/turns")

    async def reset_counters(self) -> None:
        await self._call("POST", "/reset-counters")

    # -- tasks ------------------------------------------------------------------------------
    async def get_tasks(self) -> list[Task]:
        return [Task.from_dict(t) for t in await self._call("GET", "/tasks")]

    async def add_tasks(self, tasks: list[Task]) -> None:
        await self._call("PUT", "/tasks", json={"tasks": [t.to_dict() for t in tasks]})

    async def update_task(self, task_id: str, updates: dict[str, Any]) -> None:
        wire = dict(updates)
        if "active_form" in wire:
            wire["activeForm"] = wire.pop("active_form")
        try:
            await self._call("POST", f"/tasks/{quote(task_id, safe='')}", json={"updates": wire})
        except RemoteStoreError as exc:
            if exc.status == 400:
                raise ValueError(str(exc)) from None
            raise

    # -- permissions ------------------------------------------------------------------------
    async def get_permission(self, tool_name: str, tool_input: Any = None) -> PermissionStatus:
        params = {"toolName": tool_name, "input": json.dumps(tool_input)}
        return cast(
            PermissionStatus, (await self._call("GET", "/permissions", params=params))["status"]
        )

    async def set_permission(
        self, tool_name: str, status: PermissionStatus, tool_input: Any = None
    ) -> None:
        body = {"toolName": tool_name, "status": status, "input": tool_input}
        await self._call("PUT", "/permissions", json=body)

    # -- inbox ------------------------------------------------------------------------------
    async def get_inbox_items(self) -> list[InboxItem]:
        return [InboxItem.from_dict(i) for i in await self._call("GET", "/inbox")]

    async def add_inbox_item(self, item: InboxItem) -> None:
        try:
            await self._call("POST", "/inbox", json={"item": item.to_dict()})
        except RemoteStoreError as exc:
            if _code(exc) == "duplicate_inbox_item":
                raise DuplicateInboxItem(item.id) from None
            raise

    async def update_inbox_item(self, item_id: str, updates: dict[str, Any]) -> None:
        try:
            await self._call("POST", "/inbox/update", json={"itemId": item_id, "updates": updates})
        except RemoteStoreError as exc:
            code = _code(exc)
            if code == "inbox_item_not_found":
                raise InboxItemNotFound(item_id) from None
            if code == "inbox_transition":
                raise InboxTransitionError(
                    item_id, exc.body["current_status"], exc.body["requested_status"]
                ) from None
            if exc.status == 400:
                # The runtime stores raise ValueError for bad updates (unknown field, status).
                raise ValueError(str(exc)) from None
            raise

    async def get_resolved_inbox_items(self) -> list[InboxItem]:
        return [InboxItem.from_dict(i) for i in await self._call("GET", "/inbox/resolved")]

    async def consume_resolved_inbox_items(self) -> list[InboxItem]:
        return [InboxItem.from_dict(i) for i in await self._call("POST", "/inbox/consume")]


def _sendable(message: Message) -> dict[str, Any]:
    # `is_compaction_request` marks a transient prompt; the server has no column for it.
    data = message.to_dict()
    data.pop("is_compaction_request", None)
    return data


def _code(exc: RemoteStoreError) -> str | None:
    return exc.body.get("code") if isinstance(exc.body, dict) else None


def _raise_for_error(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("error") if isinstance(body, dict) else None
    raise RemoteStoreError(response.status_code, message or response.reason_phrase, body)
