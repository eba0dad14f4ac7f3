"""Permission prompts in the approvals vocabulary: approve is "once", reject "deny once"."""

from __future__ import annotations

from typing import Any

from gloveapp.core.approvals.decisions import APPROVE, MAX_REASON, REJECT, DecisionRefused

# Permission prompts in the same vocabulary: `{"decision": "approve"}` is "once" (this call,
# nothing remembered), `{"decision": "reject", "reason": ...}` is "deny once" with a reason
# the agent reads in the tool's result. Glove's answers (once/always/deny...) stay as they are.
PERMISSION_DECISIONS: tuple[str, ...] = (APPROVE, REJECT)


def permission_decision(answer: Any) -> dict[str, Any] | None:
    """A permission prompt's answer in the approvals vocabulary, checked: `{"decision":
    "approve"}` or `{"decision": "reject", "reason": str | None}`; None when `answer` is
    not a decision (one of Glove's answers). Raises DecisionRefused naming the field."""
    if not isinstance(answer, dict) or "decision" not in answer:
        return None
    kind, reason = answer.get("decision"), answer.get("reason")
    if kind not in PERMISSION_DECISIONS:
        raise DecisionRefused(
            f"a permission prompt's decision is one of {', '.join(PERMISSION_DECISIONS)}"
        )
    if reason is not None and not isinstance(reason, str):
        raise DecisionRefused("reason must be text", field="reason")
    if reason is not None and len(reason) > MAX_REASON:
        raise DecisionRefused(f"reason is at most {MAX_REASON} characters", field="reason")
    if kind == APPROVE:
        return {"decision": APPROVE}
    return {"decision": REJECT, "reason": (reason or "").strip() or None}
