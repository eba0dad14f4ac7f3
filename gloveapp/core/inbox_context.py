"""What the agent loop tells the model about the inbox (contract §3.3, §3.4, Decisions 2-3).

- Resolved items are injected once, as a persisted user message, at the start of an ask.
- Pending blocking items produce a reminder that is never persisted and sits at the very end
  of every model call's input during that ask.
Both carry `framework_context: "inbox"`, as glove-core 4.1.0 marks them.
"""

from __future__ import annotations

import re

from gloveapp.core.store import (
    InboxTransitionError,
    StoreAdapter,
    StoreError,
    supports_inbox,
    supports_inbox_injection,
)
from gloveapp.core.types import InboxItem, Message

INBOX_FRAMEWORK_CONTEXT = "inbox"


def _js(value: str | None) -> str:
    # Glove interpolates with JS template strings, where null prints as `null`.
    return "null" if value is None else value


def resolved_banner_text(items: list[InboxItem]) -> str:
    lines = [f"[Inbox: {len(items)} item(s) resolved]"]
    lines += [
        f'- [{item.tag}] Request: "{item.request}" -> Response: "{_js(item.response)}" '
        f"(resolved {_js(item.resolved_at)})"
        for item in items
    ]
    return "\n".join(lines)


# One item of `resolved_banner_text`, up to the next item.
_BANNER_ITEM = re.compile(
    r'^- \[(?P<tag>[^\]\n]*)\] Request: "(?P<request>.*?)" -> Response: "(?P<response>.*)" '
    r"\(resolved [^)\n]*\)$",
    re.M | re.S,
)


def resolved_banner_items(text: str) -> list[tuple[str, str, str]]:
    """(tag, request, response) for each item of a `resolved_banner_text`, or [] when the
    text is not one."""
    if not text.startswith("[Inbox:") or "resolved]" not in text.split("\n", 1)[0]:
        return []
    items = re.split(r"\n(?=- \[)", text.split("\n", 1)[1] if "\n" in text else "")
    found = []
    for item in items:
        match = _BANNER_ITEM.match(item)
        if match is None:
            return []
        found.append((match["tag"], match["request"], match["response"]))
    return found


def blocking_reminder_text(items: list[InboxItem]) -> str:
    lines = [
        f"[Inbox: {len(items)} blocking item(s) still pending \u2014 you cannot proceed with "
        "actions that depend on these results]"
    ]
    lines += [f"- [{item.tag}] {item.request} (posted {_js(item.created_at)})" for item in items]
    return "\n".join(lines)


def pending_items_summary_block(items: list[InboxItem]) -> str:
    """The block the compaction summary carries for every pending item (blocking or not)."""
    pending = [item for item in items if item.status == "pending"]
    if not pending:
        return ""
    lines = [
        f"- [{item.tag}] {'BLOCKING' if item.blocking else 'non-blocking'}: {item.request}"
        for item in pending
    ]
    return (
        "\n\n[Pending inbox items \u2014 being monitored by external services]\n"
        + "\n".join(lines)
        + "\n"
    )


async def consume_resolved_items(store: StoreAdapter) -> list[InboxItem]:
    """Take every resolved item and mark it consumed, each item exactly once.

    Stores with `consume_resolved_inbox_items` do it atomically. For the others, each item is
    claimed by its own guarded `resolved -> consumed` update; an item another turn claimed
    first raises `InboxTransitionError` and is left to that turn.
    """
    if not supports_inbox(store):
        return []
    consume = getattr(store, "consume_resolved_inbox_items", None)
    if callable(consume):
        return list(await consume())
    claimed = []
    for item in await store.get_resolved_inbox_items():
        try:
            await store.update_inbox_item(item.id, {"status": "consumed"})
        except (InboxTransitionError, StoreError):
            continue
        item.status = "consumed"
        claimed.append(item)
    return claimed


async def inject_resolved_items(store: StoreAdapter) -> Message | None:
    """Persist the `[Inbox: N item(s) resolved]` message, if anything was resolved.

    Items are claimed before the message is written: claiming first is what makes two
    concurrent asks inject an item exactly once.
    """
    if supports_inbox_injection(store) and supports_inbox(store):
        # The store claims the items and writes the banner in one transaction, so a crash
        # between the two can neither lose a resolution nor deliver it twice.
        return await store.inject_resolved_inbox_items(resolved_banner_message)
    items = await consume_resolved_items(store)
    if not items:
        return None
    banner = resolved_banner_message(items)
    await store.append_messages([banner])
    return banner


def resolved_banner_message(items: list[InboxItem]) -> Message:
    return Message(
        sender="user",
        text=resolved_banner_text(items),
        framework_context=INBOX_FRAMEWORK_CONTEXT,
    )


async def build_blocking_reminder(store: StoreAdapter) -> Message | None:
    """The transient reminder of pending blocking items, or None (computed once per ask)."""
    if not supports_inbox(store):
        return None
    pending_blocking = [
        item for item in await store.get_inbox_items() if item.status == "pending" and item.blocking
    ]
    if not pending_blocking:
        return None
    return Message(
        sender="user",
        text=blocking_reminder_text(pending_blocking),
        framework_context=INBOX_FRAMEWORK_CONTEXT,
    )
