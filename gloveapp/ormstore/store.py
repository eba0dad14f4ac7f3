"""`DjangoStore`: the runtime's StoreAdapter on the Django ORM, with every capability.

Reads are the `read_*` functions below (sync; other read paths can share them); writes call
the services, so the store, the REST API and the admin share one implementation of every rule
(and of the live events). Each call runs in
`sync_to_async(thread_sensitive=True)`, as Django's own async ORM does, so the store is safe
to await from the agent loop, a Channels consumer or an async view.

What the model sees costs O(messages since the last compaction): one probe of the partial
`message_compaction_idx` index for the last marker, then a range scan on (session, seq).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async

from gloveapp.conversations import services
from gloveapp.conversations.handoff import kept_handoff_notes
from gloveapp.conversations.kept_results import tool_result_keep
from gloveapp.conversations.selectors import (
    read_counter,
    read_messages,
    read_permission,
    read_tasks,
    read_token_consumption,
)
from gloveapp.core import input_rules
from gloveapp.core.store import permission_key
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import PermissionStatus, TokenUsage
from gloveapp.core.types import Task as CoreTask
from gloveapp.lib.db.outages import healing
from inbox import services as inbox_services
from inbox.selectors import read_inbox_items


def _run(function: Any) -> Any:
    # `healing`: a call that fails because the database went away closes its thread's broken
    # connection, so the next call (a retried turn, a long-running peer's next arrival)
    # opens a new one instead of failing the same way for good.
    return sync_to_async(healing(function), thread_sensitive=True)


class DjangoStore:
    """One session's persistence. Writes create the session row on first use.

    `resolved_by` labels resolutions made through `update_inbox_item` ("agent" for the
    runtime, "api" for the REST store, "mesh" for a mesh transport). With `inbox_ttl`, every
    pending item this store posts gets an `expires_at`, so `expire_inbox_items` can answer
    it and an agent never waits forever. With `fence` (a turn's store), its messages and
    replies are stored only while the fence holds (`FencedOff` otherwise, nothing written).
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        resolved_by: str = "agent",
        inbox_ttl: timedelta | None = None,
        fence: services.Fence | None = None,
        agent_version_id: int | None = None,
    ) -> None:
        self.identifier = (
            services.check_session_id(session_id)
            if session_id is not None
            else services.new_session_id()
        )
        if resolved_by not in inbox_services.RESOLVERS:
            raise ValueError(f"resolved_by must be one of {', '.join(inbox_services.RESOLVERS)}")
        self.resolved_by = resolved_by
        self.inbox_ttl = inbox_ttl
        self.fence = fence
        # The agent version its messages name (a turn's store: the turn's version).
        self.agent_version_id = agent_version_id

    def __repr__(self) -> str:
        return f"DjangoStore({self.identifier!r})"

    # -- messages and counters ------------------------------------------------------------
    async def get_messages(self) -> list[CoreMessage]:
        return await _run(read_messages)(self.identifier, since_compaction=False)

    async def get_context_messages(self) -> list[CoreMessage]:
        return await _run(read_messages)(self.identifier, since_compaction=True)

    async def append_messages(self, messages: list[CoreMessage]) -> None:
        await _run(services.messages_append)(
            session_id=self.identifier,
            messages=messages,
            fence=self.fence,
            agent_version_id=self.agent_version_id,
        )

    async def get_kept_notes(self) -> list[str]:
        """What a compaction summary carries forward: the chat's last hand-back notes."""
        return await _run(kept_handoff_notes)(self.identifier)

    async def get_token_count(self) -> int:
        return await _run(read_counter)(self.identifier, "token_count")

    async def add_tokens(self, usage: TokenUsage) -> None:
        await _run(services.tokens_add)(session_id=self.identifier, usage=usage)

    async def get_token_consumption(self) -> TokenUsage:
        return await _run(read_token_consumption)(self.identifier)

    async def get_turn_count(self) -> int:
        return await _run(read_counter)(self.identifier, "turn_count")

    async def increment_turn(self) -> None:
        await _run(services.turn_increment)(session_id=self.identifier)

    async def record_turn(self, messages: list[CoreMessage], usage: TokenUsage) -> None:
        """The loop's reply, usage and turn count in one transaction (`turn_record`)."""
        await _run(services.turn_record)(
            session_id=self.identifier,
            messages=messages,
            usage=usage,
            fence=self.fence,
            agent_version_id=self.agent_version_id,
        )

    async def reset_counters(self) -> None:
        await _run(services.counters_reset)(session_id=self.identifier)

    # -- tasks ------------------------------------------------------------------------------
    async def get_tasks(self) -> list[CoreTask]:
        return await _run(read_tasks)(self.identifier)

    async def add_tasks(self, tasks: list[CoreTask]) -> None:
        await _run(services.tasks_replace)(session_id=self.identifier, tasks=tasks)

    async def update_task(self, task_id: str, updates: dict[str, Any]) -> None:
        await _run(services.task_update)(
            session_id=self.identifier, task_id=task_id, updates=updates
        )

    # -- results past the cap ---------------------------------------------------------------
    async def keep_tool_result(self, call_id: str, tool_name: str, whole: str) -> None:
        """The whole of a result the executor cut (`core.results`), for a download."""
        await _run(tool_result_keep)(
            session_id=self.identifier, call_id=call_id, tool_name=tool_name, whole=whole
        )

    # -- permissions ------------------------------------------------------------------------
    async def get_permission(self, tool_name: str, tool_input: Any = None) -> PermissionStatus:
        return await _run(read_permission)(self.identifier, permission_key(tool_name, tool_input))

    async def set_permission(
        self, tool_name: str, status: PermissionStatus, tool_input: Any = None
    ) -> None:
        await _run(services.permission_set)(
            session_id=self.identifier, tool_name=tool_name, status=status, tool_input=tool_input
        )

    # -- inbox ------------------------------------------------------------------------------
    async def get_inbox_items(self) -> list[CoreInboxItem]:
        return await _run(read_inbox_items)(self.identifier)

    async def add_inbox_item(self, item: CoreInboxItem) -> None:
        expires_at: datetime | None = None
        if self.inbox_ttl is not None and getattr(item, "status", None) == "pending":
            expires_at = input_rules.check_timestamp(item.created_at, "created_at") + self.inbox_ttl
        resolved_by = self.resolved_by if getattr(item, "status", None) == "resolved" else None
        await _run(inbox_services.inbox_item_add)(
            session_id=self.identifier, item=item, expires_at=expires_at, resolved_by=resolved_by
        )

    async def update_inbox_item(self, item_id: str, updates: dict[str, Any]) -> None:
        await _run(inbox_services.inbox_item_update)(
            session_id=self.identifier,
            item_id=item_id,
            updates=updates,
            resolved_by=self.resolved_by,
        )

    async def get_resolved_inbox_items(self) -> list[CoreInboxItem]:
        return await _run(read_inbox_items)(self.identifier, "resolved")

    async def consume_resolved_inbox_items(self) -> list[CoreInboxItem]:
        return await _run(inbox_services.inbox_items_consume_resolved)(session_id=self.identifier)

    async def inject_resolved_inbox_items(
        self, build_message: Callable[[list[CoreInboxItem]], CoreMessage]
    ) -> CoreMessage | None:
        return await _run(inbox_services.inbox_items_inject_resolved)(
            session_id=self.identifier, build_message=build_message
        )
