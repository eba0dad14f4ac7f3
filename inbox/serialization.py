"""Inbox item rows <-> runtime inbox items (validated with the input rules before a write)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gloveapp.conversations.serialization import iso_or_none
from gloveapp.core.approvals.inbox import inbox_decisions
from gloveapp.core.input_rules import MAX_ID, MAX_TAG, check_text, check_timestamp
from gloveapp.core.types import INBOX_STATUSES, iso_format
from gloveapp.core.types import InboxItem as CoreInboxItem

if TYPE_CHECKING:
    from inbox.models import InboxItem


def inbox_item_fields(item: CoreInboxItem) -> dict[str, Any]:
    """Column values of a runtime inbox item, validated (its id is the row's `key`; the
    service decides the global `id`). Raises ValueError."""
    if not isinstance(item, CoreInboxItem):
        raise ValueError(f"item must be an InboxItem, got {type(item).__name__}")
    if item.status not in INBOX_STATUSES:
        raise ValueError(f"status must be one of {', '.join(INBOX_STATUSES)}, got {item.status!r}")
    if item.response is not None:
        check_text(item.response, "response")
    if not isinstance(item.blocking, bool):
        raise ValueError("blocking must be true or false")
    return {
        "key": check_text(item.id, "id", allow_empty=False, max_length=MAX_ID),
        "tag": check_text(item.tag, "tag", allow_empty=False, max_length=MAX_TAG),
        "request": check_text(item.request, "request"),
        "response": item.response,
        "status": item.status,
        "blocking": item.blocking,
        "created_at": check_timestamp(item.created_at, "created_at"),
        "resolved_at": (
            check_timestamp(item.resolved_at, "resolved_at") if item.resolved_at else None
        ),
        "decisions": _declared(item.decisions),
    }


def _declared(decisions: Any) -> list[str] | None:
    declared = inbox_decisions(list(decisions) if decisions is not None else None)
    return list(declared) if declared else None


def inbox_item_to_core(row: InboxItem) -> CoreInboxItem:
    """The item as its session's side sees it: by the id it chose (`key`)."""
    return CoreInboxItem(
        id=row.key,
        tag=row.tag,
        request=row.request,
        response=row.response,
        status=row.status,  # type: ignore[arg-type]
        blocking=row.blocking,
        created_at=iso_format(row.created_at),
        resolved_at=iso_or_none(row.resolved_at),
        decisions=tuple(row.decisions) if row.decisions else None,
    )
