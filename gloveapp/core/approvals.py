"""Approvals: a person decides on exactly what a tool will run (an addition to Glove).

A tool declares an `ApprovalPolicy`: which decisions a person may take, who decides, and
its deadlines. Before such a tool runs, the executor hands the call over as an approval
prompt (renderer `approval_request`) carrying the `fingerprint` of the tool name and its
canonical arguments, and waits for a `Decision`:

- approve: the tool runs with exactly the arguments that were fingerprinted;
- edit: the tool runs with the person's arguments, validated against its input schema;
- reject: the tool does not run; the agent reads the reason;
- respond: the tool does not run; the agent reads the person's text as the call's result
  (Glove's resolution), not as an error.

A request nobody decides in time is decided by its `on_expire`; a rejection then reads
"expired", never "rejected by a person".

A decision names the fingerprint it saw; one for other arguments is refused, and the tool
never runs without a decision. Everything here is plain Python: the Django side stores the
requests and decisions (`gloveapp.approvals`), the executor only checks and obeys.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from gloveapp.core import input_rules
from gloveapp.core.types import ToolResultData

APPROVE, EDIT, REJECT, RESPOND = "approve", "edit", "reject", "respond"
DECISIONS: tuple[str, ...] = (APPROVE, EDIT, REJECT, RESPOND)
DecisionKind = Literal["approve", "edit", "reject", "respond"]
# What a decision on expiry may be (`on_expire`): an edit needs a person.
EXPIRY_DECISIONS: tuple[str, ...] = (APPROVE, REJECT, RESPOND)
APPROVAL_RENDERER = "approval_request"
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
        made = {
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


# An edit is stored like any JSON a client sends (`input_rules`' bounds on unknown fields).
MAX_EDIT_BYTES = input_rules.MAX_EXTRA_BYTES  # 256 KiB
MAX_EDIT_DEPTH = input_rules.MAX_EXTRA_DEPTH  # 32 levels


def validate_edit(tool: Any, args: Any) -> dict[str, Any]:
    """The edited arguments, checked against `tool`'s (a `tools.Tool`) input schema and the
    store's JSON bounds: an object, at most MAX_EDIT_DEPTH levels and MAX_EDIT_BYTES, no key
    the schema does not name (unless it allows more: `additionalProperties`), and valid
    for the tool's input. DecisionRefused (field "args") names what is wrong. Returns them
    as given (the tool validates again as it runs)."""
    if not isinstance(args, dict):
        raise DecisionRefused("args must be an object", field="args")
    if input_rules.json_depth(args, cap=MAX_EDIT_DEPTH) > MAX_EDIT_DEPTH:
        raise DecisionRefused(f"args nest deeper than {MAX_EDIT_DEPTH} levels", field="args")
    try:
        size = len(canonical_json(args).encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError) as error:
        raise DecisionRefused(f"args must be JSON: {error}", field="args") from None
    if size > MAX_EDIT_BYTES:
        raise DecisionRefused(
            f"args take {size} bytes; an edit takes at most {MAX_EDIT_BYTES}", field="args"
        )
    unknown = unknown_key(tool.input_schema(), args)
    if unknown is not None:
        raise DecisionRefused(
            f"args.{unknown} is not an argument of {tool.name}", field=f"args.{unknown}"
        )
    if tool.input_model is not None:
        try:
            _validated(tool.input_model, args)
        except ValidationError as error:
            raise DecisionRefused(
                f"args do not fit {tool.name}'s input: {_first(error)}", field="args"
            ) from None
    elif tool.json_schema is not None:
        import jsonschema

        try:
            jsonschema.validate(args, tool.json_schema)
        except jsonschema.ValidationError as error:
            raise DecisionRefused(
                f"args do not fit {tool.name}'s input: {error.message}", field="args"
            ) from None
        except jsonschema.SchemaError:
            pass  # the tool's own schema is broken: its run reports it
    return args


def unknown_key(schema: Any, value: Any) -> str | None:
    """The path of the first key in `value` that the JSON `schema` neither names nor allows
    (`additionalProperties` / `patternProperties`), or None. An object schema that names no
    properties at all is free-form. `$ref`s into `$defs` are followed; a value fits a union
    when it fits one of its branches. Call with a value whose depth is bounded."""
    root = schema if isinstance(schema, dict) else {}

    def resolve(node: Any, seen: int = 0) -> dict[str, Any]:
        if not isinstance(node, dict):
            return {}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and seen < 32:
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            return resolve(target, seen + 1)
        return node

    def walk(node: Any, item: Any, path: str) -> str | None:
        node = resolve(node)
        branches = [
            branch
            for word in ("anyOf", "oneOf")
            for branch in (node.get(word) or [])
            if isinstance(node.get(word), list)
        ]
        branches = [branch for branch in branches if _may_be(resolve(branch), item)]
        if branches:
            found = [walk(branch, item, path) for branch in branches]
            return None if None in found else found[0]
        for part in node.get("allOf") or []:
            found = walk(part, item, path)
            if found is not None:
                return found
        if isinstance(item, dict):
            properties = node.get("properties")
            extra = node.get("additionalProperties")
            if not isinstance(properties, dict):
                if isinstance(extra, dict):
                    for key, value in item.items():
                        found = walk(extra, value, f"{path}{key}.")
                        if found is not None:
                            return found
                return None
            for key, value in item.items():
                if key in properties:
                    found = walk(properties[key], value, f"{path}{key}.")
                elif isinstance(extra, dict):
                    found = walk(extra, value, f"{path}{key}.")
                elif extra is True or node.get("patternProperties"):
                    found = None
                else:
                    return f"{path}{key}"
                if found is not None:
                    return found
        elif isinstance(item, list):
            items = node.get("items")
            if isinstance(items, dict):
                for index, value in enumerate(item):
                    found = walk(items, value, f"{path}{index}.")
                    if found is not None:
                        return found
        return None

    return walk(root, value, "")


_JSON_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
    "integer": int,
    "number": (int, float),
}


def _may_be(node: dict[str, Any], item: Any) -> bool:
    """Whether a union branch could describe `item` at all (by its declared JSON type)."""
    declared = node.get("type")
    if declared is None:
        return True
    names = declared if isinstance(declared, list) else [declared]
    return any(isinstance(item, _JSON_TYPES.get(name, object)) for name in names)


def _validated(model: type[BaseModel], args: dict[str, Any]) -> BaseModel:
    return model.model_validate(args)


def _first(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "input"
    return f"{where}: {first.get('msg', 'invalid')}"


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


# -- what an edit changed --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ArgChange:
    """One argument a person changed: its path (`lines.0.quantity`), how people name it
    ("the quantity of Colombia Huila") and the values before and after."""

    path: str
    label: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "label": self.label, "before": self.before, "after": self.after}


def _row_title(row: Any) -> str:
    if isinstance(row, dict):
        return next((cell for cell in row.values() if isinstance(cell, str) and cell), "")
    return ""


def args_changes(before: Any, after: Any) -> list[ArgChange]:
    """What an edit changed, leaf by leaf: top-level arguments, and the cells of a list of
    objects (an order's lines) named by the row's first text ("the quantity of Kenya AA")."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [] if before == after else [ArgChange("", "the arguments", before, after)]
    changes: list[ArgChange] = []
    for key in [*before, *[k for k in after if k not in before]]:
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        words = str(key).replace("_", " ")
        if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
            for index, (old_row, new_row) in enumerate(zip(old, new, strict=True)):
                if old_row == new_row:
                    continue
                if isinstance(old_row, dict) and isinstance(new_row, dict):
                    title = _row_title(old_row)
                    for cell in [*old_row, *[c for c in new_row if c not in old_row]]:
                        if old_row.get(cell) != new_row.get(cell):
                            of = f" of {title}" if title and old_row.get(cell) != title else ""
                            changes.append(
                                ArgChange(
                                    f"{key}.{index}.{cell}",
                                    f"the {str(cell).replace('_', ' ')}{of}",
                                    old_row.get(cell),
                                    new_row.get(cell),
                                )
                            )
                else:
                    changes.append(ArgChange(f"{key}.{index}", f"the {words}", old_row, new_row))
            continue
        changes.append(ArgChange(str(key), f"the {words}", old, new))
    return changes


def _shown(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return value.replace("_", " ")
    if isinstance(value, dict | list):
        return canonical_json(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def change_sentence(who: str, changes: list[ArgChange]) -> str:
    """ "A barista changed the quantity of Colombia Huila from 6 to 4." """
    if not changes:
        return ""
    parts = [f"{c.label} from {_shown(c.before)} to {_shown(c.after)}" for c in changes]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{who} changed {listed}."
