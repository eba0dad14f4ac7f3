"""The decision vocabulary: the kinds a person may take, a `Decision` on one request (naming
the fingerprint of the call it saw), its checks, and what the agent reads of one that does
not run the tool."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gloveapp.core.types import ToolResultData

# The decision kinds, defined once: the type, the tuple and the names all come from here.
DecisionKind = Literal["approve", "edit", "reject", "respond"]
DECISIONS: tuple[DecisionKind, ...] = get_args(DecisionKind)
APPROVE, EDIT, REJECT, RESPOND = DECISIONS
# What a decision on expiry may be (`on_expire`): an edit needs a person.
EXPIRY_DECISIONS: tuple[str, ...] = (APPROVE, REJECT, RESPOND)
MAX_REASON = 10_000


class DecisionRefused(ValueError):
    """The decision cannot be taken: not allowed for this request, or malformed.

    `field` names the input at fault (REST answers 400 naming it)."""

    def __init__(self, message: str, *, field: str = "decision") -> None:
        super().__init__(message)
        self.field = field


class StaleFingerprint(DecisionRefused):
    """The decision names a fingerprint other than the request's (it saw other arguments)."""


def canonical_json(value: Any) -> str:
    """The one text of a JSON value: sorted keys, no spaces, no NaN, Unicode kept."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def fingerprint(tool_name: str, args: Any) -> str:
    """sha256 of the tool name and its canonical arguments, hex: what a decision binds to."""
    body = canonical_json({"tool": tool_name, "args": args})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's decision on one request, naming the fingerprint it saw."""

    kind: str
    fingerprint: str
    args: dict[str, Any] | None = None  # edit: the arguments the tool runs with
    reason: str | None = None  # reject: what the agent reads
    text: str | None = None  # respond: the answer instead of the tool's result
    decided_by: str | None = None
    # Taken by the deadline (`on_expire`), not by a person: the agent reads that it expired.
    expired: bool = False

    def to_dict(self) -> dict[str, Any]:
        made: dict[str, Any] = {
            "decision": self.kind,
            "fingerprint": self.fingerprint,
            "args": self.args,
            "reason": self.reason,
            "text": self.text,
            "decidedBy": self.decided_by,
        }
        if self.expired:
            made["expired"] = True
        return made

    @classmethod
    def from_dict(cls, data: Any) -> Decision:
        if not isinstance(data, dict):
            raise DecisionRefused("a decision is an object")
        kind, seen = data.get("decision"), data.get("fingerprint")
        if kind not in DECISIONS:
            raise DecisionRefused(f"decision must be one of {', '.join(DECISIONS)}")
        if not isinstance(seen, str) or not seen:
            raise DecisionRefused("a decision names the fingerprint it saw")
        args, reason, text = data.get("args"), data.get("reason"), data.get("text")
        if args is not None and not isinstance(args, dict):
            raise DecisionRefused("args must be an object")
        for name, value in (("reason", reason), ("text", text)):
            if value is not None and not isinstance(value, str):
                raise DecisionRefused(f"{name} must be text")
        by = data.get("decidedBy")
        return cls(
            kind=kind,
            fingerprint=seen,
            args=args,
            reason=reason,
            text=text,
            decided_by=by if isinstance(by, str) else None,
            expired=data.get("expired") is True,
        )


def check_decision(decision: Decision, *, allowed: tuple[str, ...], current: str) -> None:
    """Refuse a decision the request does not allow, a malformed one, or a stale one.

    Raises `StaleFingerprint` when `decision.fingerprint` is not `current`, and
    `DecisionRefused` for the rest (edit without args, respond without text, ...).
    """
    if decision.fingerprint != current:
        raise StaleFingerprint(
            f"the decision was taken on fingerprint {decision.fingerprint[:12]}..., "
            f"the request's is {current[:12]}...: reload it and decide again"
        )
    if decision.kind not in allowed:
        raise DecisionRefused(
            f"{decision.kind!r} is not allowed here; allowed: {', '.join(allowed)}"
        )
    if decision.kind == EDIT and decision.args is None:
        raise DecisionRefused("an edit gives the arguments to run with (args)")
    if decision.kind != EDIT and decision.args is not None:
        raise DecisionRefused("only an edit gives arguments")
    if decision.kind == RESPOND and not (decision.text or "").strip():
        raise DecisionRefused("a response needs text")
    for value in (decision.reason, decision.text):
        if value is not None and len(value) > MAX_REASON:
            raise DecisionRefused(f"reason and text are at most {MAX_REASON} characters")


def rejected_message(tool_name: str, reason: str | None) -> str:
    message = f'The request to run "{tool_name}" was rejected by a person; it did not run.'
    if reason and reason.strip():
        message += f" Reason: {reason.strip()}"
    return message


def expired_message(tool_name: str, note: str | None = None) -> str:
    """What the agent reads when nobody decided in time (not "rejected by a person")."""
    message = (
        f'The request to run "{tool_name}" expired before anyone decided on it; it did not run.'
    )
    if note and note.strip():
        message += f" {note.strip()}"
    return message


def not_decided_message(tool_name: str, why: str) -> str:
    return f'"{tool_name}" needs a person\'s approval and did not run: {why}'


def outcome_without_run(tool_name: str, decision: Decision) -> ToolResultData | None:
    """The result of a decision that does not run the tool (reject, respond), else None."""
    if decision.kind == REJECT and decision.expired:
        return ToolResultData(
            status="error",
            message=expired_message(tool_name),
            data={"decision": REJECT, "expired": True},
        )
    if decision.kind == REJECT:
        return ToolResultData(
            status="error",
            message=rejected_message(tool_name, decision.reason),
            data={"decision": REJECT, "reason": decision.reason},
        )
    if decision.kind == RESPOND:
        # Glove's resolution: the person's text is the call's answer, not an error. The model
        # reads the text as given (a success's `data`); the page reads `message`.
        return ToolResultData(
            status="success",
            data=decision.text or "",
            message=f"It did not run; a staff member answered: {(decision.text or '').strip()}",
        )
    return None
