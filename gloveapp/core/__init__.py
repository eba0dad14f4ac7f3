"""The Glove runtime in plain asyncio Python: no Django imports anywhere under this package.

The public surface: `Glove` + `CompactionConfig` to build and run an agent, the data types,
the store protocol with `MemoryStore`, tools (`Tool`, `@tool`), the display stack, and the
scripted model. Provider adapters are built with `get_model("anthropic:<model>")`.
"""

from __future__ import annotations

from typing import Any

from gloveapp.core.abort import AbortController, AbortSignal
from gloveapp.core.approvals.decisions import Decision
from gloveapp.core.approvals.policy import ApprovalPolicy
from gloveapp.core.builtin_tools import (
    INBOX_TOOL_NAME,
    TASK_TOOL_NAME,
    create_inbox_tool,
    create_task_tool,
)
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.display import (
    BoundDisplay,
    DisplayManager,
    Slot,
    SlotRejectedError,
    SlotRemovedError,
    visible_slots,
)
from gloveapp.core.events import EventBus, Subscriber
from gloveapp.core.glove import Glove, GloveNotBuiltError, build_user_message
from gloveapp.core.providers.base import ModelAdapter, Notify, ToolSpec
from gloveapp.core.providers.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from gloveapp.core.store import (
    DuplicateInboxItem,
    InboxItemNotFound,
    InboxTransitionError,
    MemoryStore,
    StoreAdapter,
    StoreError,
    permission_key,
    resolve_inbox_item,
    split_at_last_compaction,
    supports_inbox,
    supports_permissions,
    supports_tasks,
)
from gloveapp.core.tools import Tool, ToolContext, as_tool_result, tool
from gloveapp.core.types import (
    AbortError,
    ContentPart,
    ContentSource,
    InboxItem,
    Message,
    ModelResult,
    Task,
    TokenUsage,
    ToolCall,
    ToolResult,
    ToolResultData,
    new_inbox_item_id,
    now_iso,
)


def get_model(spec: str, **kwargs: Any) -> ModelAdapter:
    """Build a model adapter from `"<provider>:<model>"` (see `gloveapp.core.providers.registry`)."""
    # Imported on use: provider SDKs are only loaded when a provider model is asked for.
    from gloveapp.core.providers.registry import get_model as registry_get_model

    return registry_get_model(spec, **kwargs)


__all__ = [
    "INBOX_TOOL_NAME",
    "TASK_TOOL_NAME",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "ApprovalPolicy",
    "BoundDisplay",
    "CompactionConfig",
    "ContentPart",
    "ContentSource",
    "Decision",
    "DisplayManager",
    "DuplicateInboxItem",
    "EventBus",
    "Glove",
    "GloveNotBuiltError",
    "InboxItem",
    "InboxItemNotFound",
    "InboxTransitionError",
    "MemoryStore",
    "Message",
    "ModelAdapter",
    "ModelResult",
    "Notify",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedTurn",
    "Slot",
    "SlotRejectedError",
    "SlotRemovedError",
    "StoreAdapter",
    "StoreError",
    "Subscriber",
    "Task",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolResultData",
    "ToolSpec",
    "as_tool_result",
    "build_user_message",
    "create_inbox_tool",
    "create_task_tool",
    "get_model",
    "new_inbox_item_id",
    "now_iso",
    "permission_key",
    "resolve_inbox_item",
    "split_at_last_compaction",
    "supports_inbox",
    "supports_permissions",
    "supports_tasks",
    "tool",
    "visible_slots",
]
