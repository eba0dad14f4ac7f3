"""The optional judge of a replay: a model (any configured provider adapter) asked whether
each replayed reply serves the customer as well as the recorded one did, for the turns
whose replies differ (an identical reply needs no judge). The check is one line of the
agent's checks:

    judge anthropic:claude-haiku-4-5                       the default question
    judge openai:gpt-4.1-mini "Quotes the refund policy"   and a criterion of the team's

Its verdicts ("pass" or "fail", each with the judge's reason) are kept in the result's
findings and beside each judged turn; each call is a `chat {model}` span under the
conversation's `replay.conversation`, and its tokens and cost are the result's (and the
run's) judge usage, apart from the replayed conversation's own.
"""

from __future__ import annotations

import dataclasses
import json
import re
from decimal import Decimal
from typing import Any

from gloveapp.agents.config import configured_model, model_prices
from gloveapp.core.types import Message
from gloveapp.observe.cost import Usage, total_cost
from gloveapp.versions.recording import TurnOutcome
from gloveapp.versions.replay import traced_call

INSTRUCTIONS = (
    "You review a customer-support agent after a change. For one customer message you get "
    "the reply the agent gave before the change (recorded) and the reply it gives now "
    "(replayed). Answer with one JSON object and nothing else: "
    '{"verdict": "pass" or "fail", "reason": "one short sentence"}. '
    "pass: the replayed reply serves the customer at least as well as the recorded one; "
    "fail: it is worse, wrong or misses what the recorded one answered."
)
VERDICTS = ("pass", "fail")
_JSON = re.compile(r"\{.*\}", re.DOTALL)


@dataclasses.dataclass(slots=True)
class Judged:
    """One judge check over one conversation: its finding, the verdict per judged turn
    (turn index -> verdict), and what the judge's calls used."""

    finding: dict[str, Any]
    turns: dict[int, dict[str, str]]
    tokens: int = 0
    cost: Decimal | None = None


def judge_question(customer: str, recorded: TurnOutcome, replayed: TurnOutcome) -> str:
    def described(turn: TurnOutcome) -> str:
        calls = ", ".join(
            f"{call['tool']}({json.dumps(call['args'], sort_keys=True, default=str)})"
            for call in turn.tool_calls
        )
        reply = "\n".join(turn.replies) or "(no reply)"
        return f"{reply}\n(tools called: {calls or 'none'})"

    return (
        f"Customer: {customer}\n\nRecorded reply:\n{described(recorded)}\n\n"
        f"Replayed reply:\n{described(replayed)}"
    )


def parse_verdict(text: str) -> dict[str, str]:
    """The judge's answer as {"verdict", "reason"}; an answer that is no verdict fails,
    with what it said as the reason (a judge that cannot answer passes nothing)."""
    found = _JSON.search(text or "")
    try:
        data = json.loads(found.group(0)) if found else None
    except ValueError:
        data = None
    verdict = str(data.get("verdict", "")).strip().lower() if isinstance(data, dict) else ""
    if verdict not in VERDICTS or not isinstance(data, dict):
        return {"verdict": "fail", "reason": f"the judge gave no verdict: {text[:200]!r}"}
    return {"verdict": verdict, "reason": str(data.get("reason", ""))[:500]}


async def judge_conversation(
    check: dict[str, Any], recorded: list[TurnOutcome], replayed: list[TurnOutcome]
) -> Judged:
    """Ask the check's model about every turn whose replies differ."""
    spec = check["value"]
    criterion = check.get("criterion", "")
    provider = spec.partition(":")[0].strip().lower()
    model = configured_model(spec=spec)
    model.set_system_prompt(
        INSTRUCTIONS + (f"\nThe team's criterion: {criterion}" if criterion else "")
    )
    verdicts: dict[int, dict[str, str]] = {}
    usage: list[tuple[str, Usage]] = []
    for index, (old, new) in enumerate(zip(recorded, replayed, strict=True)):
        if old.replies == new.replies:
            continue
        question = Message(sender="user", text=judge_question(old.customer, old, new))
        try:
            result = await traced_call(model, provider, [question])
        except Exception as error:  # the judge away is a failed check, not a failed replay
            verdicts[index] = {"verdict": "fail", "reason": f"the judge failed: {error!r}"[:500]}
            continue
        answer = "\n".join(message.text or "" for message in result.messages)
        verdicts[index] = parse_verdict(answer)
        usage.append(
            (getattr(model, "name", "") or spec, Usage(result.tokens_in, result.tokens_out))
        )
    failed = [
        (index, verdict) for index, verdict in verdicts.items() if verdict["verdict"] == "fail"
    ]
    why = f"turn {failed[0][0] + 1}: {failed[0][1]['reason']}" if failed else ""
    cost = total_cost(usage, model_prices()).amount if usage else Decimal(0)
    return Judged(
        finding={
            "check": check["line"],
            "passed": not failed,
            "why": why,
            "judged": [{"turn": index + 1, **verdict} for index, verdict in verdicts.items()],
        },
        turns=verdicts,
        tokens=sum(row.tokens_in + row.tokens_out for _, row in usage),
        cost=cost,
    )
