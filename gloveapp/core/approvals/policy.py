"""What a tool declares (`ApprovalPolicy`: the decisions, who decides, the deadlines), the
prompt the executor hands over before such a tool runs, and what a customer may see of it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from gloveapp.core.approvals.decisions import (
    APPROVE,
    DECISIONS,
    EDIT,
    EXPIRY_DECISIONS,
    REJECT,
    fingerprint,
)

APPROVAL_RENDERER = "approval_request"


def _seconds(value: timedelta | float | int | None, name: str) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
    ):
        raise ValueError(f"{name} must be a number of seconds or a timedelta")
    if seconds <= 0:
        raise ValueError(f"{name} must be positive")
    return float(seconds)


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """What a tool declares: the decisions a person may take, who decides, the deadlines.

    `assignee_user` is a username, `assignee_group` a group name (a request may have both:
    the user or anyone in the group decides); neither puts it in the shared queue. Deadlines
    count from the request; `escalate_to_*` take over at `escalate_after`; at `expire_after`
    the request is decided `on_expire` (reject, approve, or respond with `on_expire_text`).
    Unset deadlines fall back to the settings' defaults for the tool (Django side).
    """

    decisions: tuple[str, ...] = (APPROVE, EDIT, REJECT)
    assignee_user: str | None = None
    assignee_group: str | None = None
    remind_after: float | None = None
    escalate_after: float | None = None
    escalate_to_user: str | None = None
    escalate_to_group: str | None = None
    expire_after: float | None = None
    on_expire: str = REJECT
    on_expire_text: str | None = None
    # Argument names shown to staff only (a customer's page shows the rest).
    staff_only: tuple[str, ...] = field(default=())
    # When only some calls need a person (an order over a threshold): `when(args)` true
    # asks, false runs at once; `args` are as the tool receives them (validated, coerced),
    # and a `when` that raises asks (the executor's `policy_applies`). Not stored with the
    # request: the executor's rule.
    when: Callable[[Any], bool] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        decisions = tuple(self.decisions)
        if not decisions or any(kind not in DECISIONS for kind in decisions):
            raise ValueError(f"decisions must be some of {', '.join(DECISIONS)}")
        object.__setattr__(self, "decisions", tuple(dict.fromkeys(decisions)))
        if self.on_expire not in EXPIRY_DECISIONS:
            raise ValueError(f"on_expire must be one of {', '.join(EXPIRY_DECISIONS)}")
        for name in ("remind_after", "escalate_after", "expire_after"):
            object.__setattr__(self, name, _seconds(getattr(self, name), name))
        object.__setattr__(self, "staff_only", tuple(self.staff_only))

    def applies(self, args: Any) -> bool:
        """Does this call need a decision? `args` as the tool will receive them."""
        return self.when is None or bool(self.when(args))

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisions": list(self.decisions),
            "assigneeUser": self.assignee_user,
            "assigneeGroup": self.assignee_group,
            "remindAfter": self.remind_after,
            "escalateAfter": self.escalate_after,
            "escalateToUser": self.escalate_to_user,
            "escalateToGroup": self.escalate_to_group,
            "expireAfter": self.expire_after,
            "onExpire": self.on_expire,
            "onExpireText": self.on_expire_text,
            "staffOnly": list(self.staff_only),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalPolicy:
        return cls(
            decisions=tuple(data.get("decisions") or (APPROVE, EDIT, REJECT)),
            assignee_user=data.get("assigneeUser"),
            assignee_group=data.get("assigneeGroup"),
            remind_after=data.get("remindAfter"),
            escalate_after=data.get("escalateAfter"),
            escalate_to_user=data.get("escalateToUser"),
            escalate_to_group=data.get("escalateToGroup"),
            expire_after=data.get("expireAfter"),
            on_expire=data.get("onExpire") or REJECT,
            on_expire_text=data.get("onExpireText"),
            staff_only=tuple(data.get("staffOnly") or ()),
        )


def approval_prompt(tool: Any, tool_input: Any, policy: ApprovalPolicy) -> dict[str, Any]:
    """What the executor hands over before an approval-gated tool runs."""
    return {
        "renderer": APPROVAL_RENDERER,
        "toolName": tool.name,
        "toolInput": tool_input,
        "fingerprint": fingerprint(tool.name, tool_input),
        "policy": policy.to_dict(),
        "inputSchema": tool.input_schema(),
    }


def customer_view(prompt: dict[str, Any]) -> dict[str, Any]:
    """An approval prompt as the customer's side may see it: the tool, its arguments less
    the staff-only ones, and the decisions; no assignee, deadlines or schema."""
    policy = prompt.get("policy") or {}
    hidden = set(policy.get("staffOnly") or ())
    args = prompt.get("toolInput")
    if isinstance(args, dict):
        args = {key: value for key, value in args.items() if key not in hidden}
    return {
        "renderer": APPROVAL_RENDERER,
        "toolName": prompt.get("toolName"),
        "toolInput": args,
    }
