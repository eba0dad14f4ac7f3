"""The decisions on inbox items an agent posts: which ones an item declares, and what the
agent reads of a person's answer."""

from __future__ import annotations

from typing import Any

from gloveapp.core.approvals.decisions import (
    APPROVE,
    DECISIONS,
    MAX_REASON,
    REJECT,
    RESPOND,
    DecisionRefused,
)

# Inbox items an agent posts (`glove_post_to_inbox`): a person approves, rejects or responds
# (there are no arguments to edit). An item that declares nothing takes a response only:
# Glove's text resolution.
INBOX_DECISIONS: tuple[str, ...] = (APPROVE, REJECT, RESPOND)
INBOX_DEFAULT_DECISIONS: tuple[str, ...] = (RESPOND,)


def inbox_decisions(value: Any) -> tuple[str, ...] | None:
    """The decisions an inbox item declares, checked; None (or empty) is respond only."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise DecisionRefused(
            f"decisions must be a list of {', '.join(INBOX_DECISIONS)}", field="decisions"
        )
    if any(kind not in INBOX_DECISIONS for kind in value):
        raise DecisionRefused(
            f"an inbox item's decisions are some of {', '.join(INBOX_DECISIONS)}",
            field="decisions",
        )
    declared = tuple(dict.fromkeys(value))
    return declared if declared and declared != INBOX_DEFAULT_DECISIONS else None


def inbox_allowed(declared: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    return tuple(declared) if declared else INBOX_DEFAULT_DECISIONS


def inbox_decision_response(
    kind: str | None,
    *,
    allowed: tuple[str, ...],
    response: str | None = None,
    reason: str | None = None,
) -> tuple[str, str]:
    """(decision, the text the agent reads) for a person's answer to an inbox item.

    `kind` None is Glove's plain text resolution (a respond). Approve reads "Approved."
    and reject "Rejected." (each followed by the person's `reason`, if any); respond reads
    `response` as given. Raises DecisionRefused naming the field at fault.
    """
    if kind is None:
        if RESPOND not in allowed:
            raise DecisionRefused(
                f"this item asks for a decision ({', '.join(allowed)}), not a plain response"
            )
        kind = RESPOND
    if kind not in DECISIONS:
        raise DecisionRefused(f"decision must be one of {', '.join(INBOX_DECISIONS)}")
    if kind not in allowed:
        raise DecisionRefused(
            f"decision {kind!r} is not allowed for this item; allowed: {', '.join(allowed)}"
        )
    for name, value in (("reason", reason), ("response", response)):
        if value is not None and not isinstance(value, str):
            raise DecisionRefused(f"{name} must be text", field=name)
        if value is not None and len(value) > MAX_REASON:
            raise DecisionRefused(f"{name} is at most {MAX_REASON} characters", field=name)
    if kind == RESPOND:
        if reason is not None:
            raise DecisionRefused(
                "a response gives its text as response, not reason", field="reason"
            )
        if not (response or "").strip():
            raise DecisionRefused("a response needs text (response)", field="response")
        return kind, response or ""
    if response is not None:
        raise DecisionRefused(f"{kind} takes a reason, not a response", field="response")
    word = "Approved" if kind == APPROVE else "Rejected"
    note = (reason or "").strip()
    return kind, f"{word}: {note}" if note else f"{word}."
