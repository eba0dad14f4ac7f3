"""What a replay found: recorded and replayed turns side by side, where they first differ,
and the checks a team wrote once for an agent (one a line, on the agent's pointer):

    must_call check_stock when "in stock"     a tool that must be called (where the customer
                                              said the phrase; everywhere without `when`)
    must_not_call refund                      a tool that must not be called
    says "Thank you"                          a phrase every conversation's replies contain
    never_says "guarantee"                    a phrase no reply contains
    asks_approval checkout                    an approval that must be asked (if it is called)
    cost_below 0.05                           dollars per conversation, at GLOVE_MODEL_PRICES
    tokens_below 20000                        tokens per conversation
    judge anthropic:claude-haiku-4-5          a model judges each replayed reply that differs
    judge openai:gpt-4.1-mini "Quotes prices"   against the recorded one (`judge`), with a
                                              criterion of the team's if given
"""

from __future__ import annotations

import shlex
from decimal import Decimal, InvalidOperation
from typing import Any

from gloveapp.versions.recording import TurnOutcome

# What makes two turns the same, in the order a divergence names them.
COMPARED = ("tool_calls", "replies", "approvals", "handoffs")
CHECK_KINDS = {
    "must_call": "tool",
    "must_not_call": "tool",
    "says": "phrase",
    "never_says": "phrase",
    "asks_approval": "tool",
    "cost_below": "number",
    "tokens_below": "number",
    "judge": "model",
}


class ChecksInvalid(ValueError):
    pass


def side_by_side(
    recorded: list[TurnOutcome], replayed: list[TurnOutcome]
) -> tuple[list[dict[str, Any]], str]:
    """The turns paired, each marked same or not, and where they first differ ("" if
    nowhere)."""
    rows: list[dict[str, Any]] = []
    divergence = ""
    for index, (old, new) in enumerate(zip(recorded, replayed, strict=True), start=1):
        differs = [name for name in COMPARED if getattr(old, name) != getattr(new, name)]
        if new.unrecorded and "tool_calls" not in differs:
            differs.insert(0, "tool_calls")
        rows.append(
            {
                "customer": old.customer,
                "recorded": old.to_dict(),
                "replayed": new.to_dict(),
                "same": not differs,
                "differs": differs,
            }
        )
        if differs and not divergence:
            divergence = f"turn {index}: {differs[0].replace('_', ' ')}"
    return rows, divergence


def parse_checks(text: str) -> list[dict[str, Any]]:
    """The checks' lines as data; `ChecksInvalid` names the first wrong line."""
    checks: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError as error:
            raise ChecksInvalid(f"line {number}: {error}") from None
        kind = words[0]
        if kind not in CHECK_KINDS or len(words) < 2:
            raise ChecksInvalid(
                f"line {number}: expected one of {', '.join(CHECK_KINDS)} and its value"
            )
        check: dict[str, Any] = {"kind": kind, "value": words[1], "line": line}
        if CHECK_KINDS[kind] == "number":
            try:
                Decimal(words[1])
            except InvalidOperation:
                raise ChecksInvalid(f"line {number}: {words[1]!r} is not a number") from None
        rest = words[2:]
        if kind == "judge":
            if ":" not in words[1] or len(rest) > 1:
                raise ChecksInvalid(
                    f'line {number}: expected judge provider:model and, maybe, one "criterion"'
                )
            if rest:
                check["criterion"] = rest[0]
        elif rest:
            if kind != "must_call" or len(rest) != 2 or rest[0] != "when":
                raise ChecksInvalid(f"line {number}: unexpected {' '.join(rest)!r}")
            check["when"] = rest[1]
        checks.append(check)
    return checks


def findings_of(
    checks: list[dict[str, Any]],
    replayed: list[TurnOutcome],
    judged: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Each check on the replayed conversation: {"check", "passed", "why"}; a judge's
    finding is the one it gave (`judge.judge_conversation`), by the check's line."""
    calls = [call["tool"] for turn in replayed for call in turn.tool_calls]
    approvals = [tool for turn in replayed for tool in turn.approvals]
    replies = "\n".join(reply for turn in replayed for reply in turn.replies).lower()
    customer = "\n".join(turn.customer for turn in replayed).lower()
    tokens = sum(turn.tokens for turn in replayed)
    costs = [Decimal(turn.cost) for turn in replayed if turn.cost is not None]
    findings: list[dict[str, Any]] = []
    for check in checks:
        kind, value = check["kind"], check["value"]
        passed, why = True, ""
        if kind == "judge":
            findings.append(
                (judged or {}).get(check["line"])
                or {"check": check["line"], "passed": True, "why": "", "judged": []}
            )
            continue
        if kind == "must_call":
            when = check.get("when")
            if (when is None or when.lower() in customer) and value not in calls:
                passed, why = False, f"{value} was not called"
        elif kind == "must_not_call" and value in calls:
            passed, why = False, f"{value} was called"
        elif kind == "says" and value.lower() not in replies:
            passed, why = False, f"no reply says {value!r}"
        elif kind == "never_says" and value.lower() in replies:
            passed, why = False, f"a reply says {value!r}"
        elif kind == "asks_approval" and value in calls and value not in approvals:
            passed, why = False, f"{value} was called without an approval"
        elif kind == "tokens_below" and tokens >= Decimal(value):
            passed, why = False, f"{tokens} tokens"
        elif kind == "cost_below" and costs and sum(costs) >= Decimal(value):
            passed, why = False, f"${sum(costs)}"
        findings.append({"check": check["line"], "passed": passed, "why": why})
    return findings
