"""Read-side queries of the REST remote store, returning runtime (wire-format) objects.

Writes go through `conversations.services` / `inbox.services`; these only read, with the
same queries and order as `DjangoStore`'s readers, so a remote caller sees what a local one
would. (They mirror `conversations/store.py`'s private `_messages`, `_tasks`, ...; if those
become a public selectors module, these should call it.)
"""

from __future__ import annotations

from typing import Any

from gloveapp.conversations import convert
from gloveapp.conversations.models import Message, Permission, Task
from gloveapp.core.store import permission_key
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import PermissionStatus
from gloveapp.core.types import Task as CoreTask
from inbox.models import InboxItem


def session_messages(*, session_id: str, since_compaction: bool = False) -> list[CoreMessage]:
    """The whole history, or only what the model sees: from the last compaction marker on.

    The marker lookup is one probe of the partial compaction index, so the context read
    costs O(messages since the last compaction), not O(history) (spec Decision 4).
    """
    rows = Message.objects.filter(session_id=session_id)
    if since_compaction:
        last_marker = (
            Message.objects.filter(session_id=session_id, is_compaction=True)
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        if last_marker is not None:
            rows = rows.filter(seq__gte=last_marker)
    # values_list, not model instances: long histories are read on every turn.
    values = rows.order_by("seq").values_list(*convert.MESSAGE_VALUES)
    return [convert.message_from_values(row) for row in values]


def session_tasks(*, session_id: str) -> list[CoreTask]:
    rows = Task.objects.filter(session_id=session_id).order_by("position", "pk")
    return [convert.task_to_core(row) for row in rows]


def session_permission(*, session_id: str, tool_name: str, tool_input: Any) -> PermissionStatus:
    status = (
        Permission.objects.filter(session_id=session_id, key=permission_key(tool_name, tool_input))
        .values_list("status", flat=True)
        .first()
    )
    return status or "unset"  # type: ignore[return-value]


def session_inbox_items(*, session_id: str, status: str | None = None) -> list[CoreInboxItem]:
    rows = InboxItem.objects.filter(session_id=session_id)
    if status is not None:
        rows = rows.filter(status=status)
    return [convert.inbox_item_to_core(row) for row in rows.order_by("created_at", "pk")]
