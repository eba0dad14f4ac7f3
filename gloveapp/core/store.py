"""The store protocol every persistence backend implements, and the in-memory reference store.

Required methods mirror glove-core's `StoreAdapter` in snake_case. Tasks, permissions and the
inbox are optional capabilities: the runtime checks for them with `supports_tasks`,
`supports_permissions` and `supports_inbox`, and registers the matching built-in tools.

Two places where this project is stricter than Glove (spec "Decisions" 3-5):
- `consume_resolved_inbox_items()` returns the resolved items and marks them consumed in one
  atomic step, so two concurrent turns never inject the same item twice.
- `update_inbox_item()` only allows pending -> resolved, resolved -> consumed and
  pending -> consumed (a withdrawn request); anything else raises `InboxTransitionError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gloveapp.core.types import (
    INBOX_STATUSES,
    TASK_STATUSES,
    InboxItem,
    Message,
    PermissionStatus,
    Task,
    TokenUsage,
    epoch_ms,
    now_iso,
)

if TYPE_CHECKING:
    from typing_extensions import TypeIs

# (from_status, to_status) pairs an inbox item may take.
ALLOWED_INBOX_TRANSITIONS: frozenset[tuple[str, str]] = frozenset(
    {("pending", "resolved"), ("resolved", "consumed"), ("pending", "consumed")}
)
INBOX_UPDATE_FIELDS = frozenset({"status", "response", "resolved_at"})
TASK_UPDATE_FIELDS = frozenset({"status", "content", "active_form"})


class StoreError(Exception):
    """Base class for store errors with a message meant for people."""


class InboxItemNotFound(StoreError, LookupError):
    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        super().__init__(f'No inbox item with id "{item_id}".')


class InboxTransitionError(StoreError, ValueError):
    def __init__(self, item_id: str, current: str, requested: str) -> None:
        self.item_id = item_id
        self.current_status = current
        self.requested_status = requested
        if current == requested or (current == "consumed" and requested == "resolved"):
            reason = f"it is already {current}"
        else:
            reason = f"it is {current}"
        super().__init__(f'Inbox item "{item_id}" cannot become {requested}: {reason}.')


class DuplicateInboxItem(StoreError, ValueError):
    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        super().__init__(f'An inbox item with id "{item_id}" already exists.')


@runtime_checkable
class StoreAdapter(Protocol):
    """What the agent loop needs from persistence (glove-core's required methods)."""

    identifier: str

    async def get_messages(self) -> list[Message]:
        """The full history, oldest first. Never truncated by the store."""
        ...

    async def get_context_messages(self) -> list[Message]:
        """Messages from the last compaction marker (inclusive) on: what the model sees."""
        ...

    async def append_messages(self, messages: list[Message]) -> None: ...

    async def get_token_count(self) -> int: ...

    async def add_tokens(self, usage: TokenUsage) -> None: ...

    async def get_turn_count(self) -> int: ...

    async def increment_turn(self) -> None: ...

    async def reset_counters(self) -> None:
        """Zero the token and turn counters. Never deletes messages."""
        ...


class TaskStore(Protocol):
    async def get_tasks(self) -> list[Task]: ...

    async def add_tasks(self, tasks: list[Task]) -> None:
        """Replace the whole task list (every Glove store overwrites)."""
        ...

    async def update_task(self, task_id: str, updates: dict[str, Any]) -> None:
        """Update `status`/`content`/`active_form` of one task; unknown ids are a silent no-op."""
        ...


class PermissionStore(Protocol):
    async def get_permission(self, tool_name: str, tool_input: Any = None) -> PermissionStatus: ...

    async def set_permission(
        self, tool_name: str, status: PermissionStatus, tool_input: Any = None
    ) -> None: ...


class InboxStore(Protocol):
    async def get_inbox_items(self) -> list[InboxItem]: ...

    async def add_inbox_item(self, item: InboxItem) -> None:
        """Store a new item; raises `DuplicateInboxItem` if the id exists."""
        ...

    async def update_inbox_item(self, item_id: str, updates: dict[str, Any]) -> None:
        """Apply `status`/`response`/`resolved_at`; raises `InboxItemNotFound` or
        `InboxTransitionError`."""
        ...

    async def get_resolved_inbox_items(self) -> list[InboxItem]: ...

    async def consume_resolved_inbox_items(self) -> list[InboxItem]:
        """Atomically return every resolved item and mark it consumed."""
        ...


class InboxInjectStore(Protocol):
    """Optional, preferred by the loop when present: the inbox banner written as one."""

    async def inject_resolved_inbox_items(
        self, build_message: Callable[[list[InboxItem]], Message]
    ) -> Message | None:
        """Claim the resolved items AND append `build_message(items)` in one atomic step."""
        ...


class TurnRecordStore(Protocol):
    """Optional, preferred by the loop when present: a model reply's writes as one."""

    async def record_turn(self, messages: list[Message], usage: TokenUsage) -> None:
        """`append_messages(messages)`, `add_tokens(usage)` and `increment_turn()`, all or
        nothing (one transaction for a database store)."""
        ...


def supports_turn_record(store: object) -> TypeIs[TurnRecordStore]:
    return _has_methods(store, ("record_turn",))


def _has_methods(store: object, names: Iterable[str]) -> bool:
    return all(callable(getattr(store, name, None)) for name in names)


def supports_tasks(store: object) -> TypeIs[TaskStore]:
    return _has_methods(store, ("get_tasks", "add_tasks"))


def supports_permissions(store: object) -> TypeIs[PermissionStore]:
    return _has_methods(store, ("get_permission", "set_permission"))


def supports_inbox_injection(store: object) -> TypeIs[InboxInjectStore]:
    return _has_methods(store, ("inject_resolved_inbox_items",))


def supports_inbox(store: object) -> TypeIs[InboxStore]:
    return _has_methods(
        store,
        ("get_inbox_items", "add_inbox_item", "update_inbox_item", "get_resolved_inbox_items"),
    )


def permission_key(tool_name: str, tool_input: Any = None) -> str:
    """`{tool}::{JSON}` with JS `JSON.stringify` spacing, so keys match Glove's rows."""
    try:
        encoded = json.dumps(tool_input, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        encoded = "null"
    return f"{tool_name}::{encoded}"


def split_at_last_compaction(messages: list[Message]) -> list[Message]:
    """The slice from the last compaction summary (inclusive) to the end, or everything."""
    for index in range(len(messages) - 1, 0, -1):
        if messages[index].is_compaction:
            return messages[index:]
    return messages


def check_inbox_transition(item: InboxItem, updates: dict[str, Any]) -> None:
    unknown = set(updates) - INBOX_UPDATE_FIELDS
    if unknown:
        raise ValueError(f"unknown inbox update field(s): {', '.join(sorted(unknown))}")
    requested = updates.get("status")
    if requested is None:
        return
    if requested not in INBOX_STATUSES:
        raise ValueError(f"status must be one of {', '.join(INBOX_STATUSES)}, got {requested!r}")
    if (item.status, requested) not in ALLOWED_INBOX_TRANSITIONS:
        raise InboxTransitionError(item.id, item.status, requested)


def apply_task_updates(task: Task, updates: dict[str, Any]) -> None:
    unknown = set(updates) - TASK_UPDATE_FIELDS - {"activeForm"}
    if unknown:
        raise ValueError(f"unknown task update field(s): {', '.join(sorted(unknown))}")
    if "status" in updates:
        if updates["status"] not in TASK_STATUSES:
            raise ValueError(f"status must be one of {', '.join(TASK_STATUSES)}")
        task.status = updates["status"]
    if "content" in updates:
        task.content = updates["content"]
    if "active_form" in updates or "activeForm" in updates:
        task.active_form = updates["active_form" if "active_form" in updates else "activeForm"]


async def resolve_inbox_item(store: InboxStore, item_id: str, response: str) -> InboxItem:
    """Move one item from pending to resolved with `response`.

    Raises `InboxItemNotFound` for an unknown id and `InboxTransitionError` (whose message says
    "already resolved" or "already consumed") when the item is no longer pending.
    """
    await store.update_inbox_item(
        item_id, {"status": "resolved", "response": response, "resolved_at": now_iso()}
    )
    for item in await store.get_inbox_items():
        if item.id == item_id:
            return item
    raise InboxItemNotFound(item_id)


class MemoryStore:
    """An in-memory store implementing every capability; the reference for the contract tests.

    Getters return copies, unlike glove-core's MemoryStore, so callers cannot mutate the store.
    """

    def __init__(self, identifier: str | None = None) -> None:
        self.identifier = identifier or f"glove_{epoch_ms()}"
        self._messages: list[Message] = []
        self._last_compaction_index = 0
        self._usage = TokenUsage()
        self._turns = 0
        self._tasks: list[Task] = []
        self._inbox: dict[str, InboxItem] = {}
        self._permissions: dict[str, PermissionStatus] = {}

    # -- messages and counters ------------------------------------------------------------
    async def get_messages(self) -> list[Message]:
        return list(self._messages)

    async def get_context_messages(self) -> list[Message]:
        return self._messages[self._last_compaction_index :]

    async def append_messages(self, messages: list[Message]) -> None:
        for message in messages:
            if message.is_compaction and self._messages:
                self._last_compaction_index = len(self._messages)
            self._messages.append(message)

    async def get_token_count(self) -> int:
        return self._usage.tokens_in + self._usage.tokens_out

    async def get_token_consumption(self) -> TokenUsage:
        return TokenUsage(**self._usage.to_dict())

    async def add_tokens(self, usage: TokenUsage) -> None:
        self._usage.tokens_in += usage.tokens_in
        self._usage.tokens_out += usage.tokens_out
        if usage.cache_creation_input_tokens:
            self._usage.cache_creation_input_tokens = (
                self._usage.cache_creation_input_tokens or 0
            ) + usage.cache_creation_input_tokens
        if usage.cache_read_input_tokens:
            self._usage.cache_read_input_tokens = (
                self._usage.cache_read_input_tokens or 0
            ) + usage.cache_read_input_tokens

    async def get_turn_count(self) -> int:
        return self._turns

    async def increment_turn(self) -> None:
        self._turns += 1

    async def reset_counters(self) -> None:
        self._usage = TokenUsage()
        self._turns = 0

    # -- tasks ------------------------------------------------------------------------------
    async def get_tasks(self) -> list[Task]:
        return [Task(t.id, t.content, t.active_form, t.status) for t in self._tasks]

    async def add_tasks(self, tasks: list[Task]) -> None:
        self._tasks = [Task(t.id, t.content, t.active_form, t.status) for t in tasks]

    async def update_task(self, task_id: str, updates: dict[str, Any]) -> None:
        for task in self._tasks:
            if task.id == task_id:
                apply_task_updates(task, updates)
                return

    # -- permissions ------------------------------------------------------------------------
    async def get_permission(self, tool_name: str, tool_input: Any = None) -> PermissionStatus:
        return self._permissions.get(permission_key(tool_name, tool_input), "unset")

    async def set_permission(
        self, tool_name: str, status: PermissionStatus, tool_input: Any = None
    ) -> None:
        self._permissions[permission_key(tool_name, tool_input)] = status

    # -- inbox ------------------------------------------------------------------------------
    async def get_inbox_items(self) -> list[InboxItem]:
        return [InboxItem(**item.to_dict()) for item in self._inbox.values()]

    async def add_inbox_item(self, item: InboxItem) -> None:
        if item.id in self._inbox:
            raise DuplicateInboxItem(item.id)
        self._inbox[item.id] = InboxItem(**item.to_dict())

    async def update_inbox_item(self, item_id: str, updates: dict[str, Any]) -> None:
        item = self._inbox.get(item_id)
        if item is None:
            raise InboxItemNotFound(item_id)
        check_inbox_transition(item, updates)
        for key, value in updates.items():
            setattr(item, key, value)

    async def get_resolved_inbox_items(self) -> list[InboxItem]:
        return [InboxItem(**i.to_dict()) for i in self._inbox.values() if i.status == "resolved"]

    async def consume_resolved_inbox_items(self) -> list[InboxItem]:
        # No await between reading and marking: atomic with respect to other coroutines.
        consumed = []
        for item in self._inbox.values():
            if item.status == "resolved":
                consumed.append(InboxItem(**item.to_dict()))
                item.status = "consumed"
        return consumed

    async def inject_resolved_inbox_items(
        self, build_message: Callable[[list[InboxItem]], Message]
    ) -> Message | None:
        items = await self.consume_resolved_inbox_items()
        if not items:
            return None
        message = build_message(items)
        await self.append_messages([message])
        return message
