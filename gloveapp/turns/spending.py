"""A turn's model calls within its budgets: reserve before, settle after, and at a limit
warn, wait on a person or stop.

`answer_turn` makes the turn's `Spending` current for the attempt; every model call of the
turn (its agent's, its subagents', each retry) goes through `TurnObserver`'s model, which
asks it to `reserve` the call's worst case before the call and to `settle` (or `release`)
after. At a `require_person` budget the call waits on an approval "raise the limit" (a
prompt like a tool's, decided in /approvals/; the turn parks meanwhile, and its next attempt
finds the decision again by the prompt's call id): approved, the budget no longer stops this
turn; rejected or expired, the turn stops with a message the customer reads.
"""

from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from gloveapp.agents.config import model_prices
from gloveapp.budgets.applying import subject_for
from gloveapp.budgets.services import (
    BudgetExceeded,
    Held,
    ModelUnpriced,
    budget_release,
    budget_reservations_close,
    budget_reserve,
    budget_settle,
    open_reservation_turns,
)
from gloveapp.core.approvals.decisions import APPROVE, REJECT, fingerprint
from gloveapp.core.approvals.policy import APPROVAL_RENDERER, ApprovalPolicy
from gloveapp.observe.cost import MILLION, Usage, cost_of, price_for
from gloveapp.turns.models import Turn
from gloveapp.versions.selectors import version_budget_rules

# The approval a `require_person` budget asks for, as the approvals pages show it.
RAISE_LIMIT = "raise_budget_limit"
_current: contextvars.ContextVar[Spending | None] = contextvars.ContextVar(
    "glove_turn_spending", default=None
)


class SpendingStopped(Exception):
    """The turn stops at a budget: refused, or a person declined to raise it. The message is
    what the customer reads."""

    def __init__(self, message: str, *, budget: str) -> None:
        super().__init__(message)
        self.budget = budget


def current_spending() -> Spending | None:
    return _current.get()


def estimated_input_tokens(messages: Any, tools: Any, system_prompt: str | None) -> int:
    """A generous count of a prompt's input tokens (about three characters a token, plus
    each message's framing): the reservation is settled to the provider's count after."""
    chars = len(system_prompt or "")
    for message in messages or ():
        chars += 16 + len(getattr(message, "text", "") or "")
        for name in ("tool_calls", "tool_results", "content"):
            value = getattr(message, name, None)
            if value:
                chars += len(repr(value))
    for tool in tools or ():
        chars += len(repr(tool))
    return math.ceil(chars / 3)


@dataclass(slots=True)
class Spending:
    """One attempt of a turn's budgets: who it is for, the budgets raised for it."""

    turn: Turn
    display: Any
    session_id: str
    raised: set[str] = field(default_factory=set)
    _subjects: dict[str, Any] = field(default_factory=dict)

    def begin(self) -> contextvars.Token[Spending | None]:
        return _current.set(self)

    @staticmethod
    def end(token: contextvars.Token[Spending | None]) -> None:
        _current.reset(token)

    async def _subject(self, agent: str) -> Any:
        found = self._subjects.get(agent)
        if found is None:
            found = self._subjects[agent] = await sync_to_async(self._read_subject)(agent)
        return found

    def _read_subject(self, agent: str) -> Any:
        return subject_for(
            user_id=self.turn.user_id,
            agent=agent,
            session_id=self.session_id,
            turn_id=self.turn.pk,
            # The budgets of the version the turn runs on (they count its agent's calls).
            version_rules=version_budget_rules(self.turn.agent_version_id),
        )

    async def reserve(self, adapter: Any, messages: Any, tools: Any, *, agent: str) -> Held:
        """Reserve the call's worst case, or wait on a person, or raise `SpendingStopped`."""
        model = getattr(adapter, "name", "") or ""
        price = price_for(model, model_prices())
        max_out = getattr(adapter, "max_tokens", None)
        if not isinstance(max_out, int) or isinstance(max_out, bool) or max_out <= 0:
            max_out = settings.GLOVE_BUDGET_MAX_OUTPUT_TOKENS
        tokens_in = estimated_input_tokens(messages, tools, getattr(adapter, "system_prompt", None))
        usd = None
        if price is not None:
            usd = (
                tokens_in * max(price.input, price.cache_write) + max_out * price.output
            ) / MILLION
        subject = await self._subject(agent)
        while True:
            try:
                return await sync_to_async(budget_reserve)(
                    subject=subject,
                    usd=usd,
                    tokens=tokens_in + max_out,
                    model=model,
                    attempt=self.turn.attempts,
                    allow=frozenset(self.raised),
                )
            except BudgetExceeded as exceeded:
                if exceeded.rule.action != "require_person" or isinstance(exceeded, ModelUnpriced):
                    raise SpendingStopped(str(exceeded), budget=exceeded.budget) from None
                await self._ask_person(exceeded, subject)

    async def _ask_person(self, exceeded: BudgetExceeded, subject: Any) -> None:
        """Wait for the approval "raise the limit" of this budget for this turn."""
        rule = exceeded.rule
        args = {
            "budget": rule.key,
            "name": rule.title,
            "window": rule.window,
            "cap_usd": None if rule.cap_usd is None else str(rule.cap_usd),
            "cap_tokens": rule.cap_tokens,
            "reached": exceeded.kind,
            "user": subject.username or None,
            "agent": subject.agent,
            "turn": self.turn.pk,
        }
        prompt = {
            "renderer": APPROVAL_RENDERER,
            "toolName": RAISE_LIMIT,
            "toolInput": args,
            "fingerprint": fingerprint(RAISE_LIMIT, args),
            "policy": ApprovalPolicy(decisions=(APPROVE, REJECT)).to_dict(),
            "inputSchema": {"type": "object"},
        }
        answer = await self.display.push_and_wait(
            renderer=APPROVAL_RENDERER,
            input=prompt,
            tool_name=RAISE_LIMIT,
            # The same id on every attempt: a continuing attempt finds the same request.
            call_id=f"budget-{rule.key}"[:200],
        )
        decided = answer.get("decision") if isinstance(answer, dict) else None
        if decided == APPROVE:
            self.raised.add(rule.key)
            return
        reason = answer.get("reason") if isinstance(answer, dict) else None
        expired = isinstance(answer, dict) and answer.get("expired")
        why = (
            "nobody decided in time"
            if expired
            else "a person declined to raise it" + (f": {reason.strip()}" if reason else "")
        )
        raise SpendingStopped(
            f'The limit "{rule.title}" (budget "{rule.key}") is reached and {why}; the agent '
            "stopped here.",
            budget=rule.key,
        )

    async def settle(self, held: Held, model: str, result: Any) -> None:
        if not held.ids:
            return
        usage = Usage(
            tokens_in=result.tokens_in or 0,
            tokens_out=result.tokens_out or 0,
            cache_read=result.cache_read_input_tokens or 0,
            cache_write=result.cache_creation_input_tokens or 0,
        )
        price = price_for(model, model_prices())
        usd = None if price is None else cost_of(usage, price)
        await sync_to_async(budget_settle)(
            held=held,
            usd=usd,
            tokens=usage.tokens_in + usage.tokens_out + usage.cache_read + usage.cache_write,
        )

    async def release(self, held: Held) -> None:
        if held.ids:
            await sync_to_async(budget_release)(held=held)


def reservations_heal() -> int:
    """The scheduler's safety net: open reservations older than
    GLOVE_BUDGET_HEAL_AFTER_SECONDS of turns that no longer run (a take-back settles a dead
    worker's at once) are settled at their maximum. Returns how many."""
    stale = open_reservation_turns(
        older_than=timedelta(seconds=settings.GLOVE_BUDGET_HEAL_AFTER_SECONDS)
    )
    if not stale:
        return 0
    running = dict(
        Turn.objects.filter(pk__in=stale, status=Turn.Status.RUNNING).values_list("pk", "attempts")
    )
    closed = 0
    for turn_id in stale:
        if turn_id in running:
            # Only what earlier attempts left: the running one settles its own.
            closed += budget_reservations_close(turn_id=turn_id, below_attempt=running[turn_id])
        else:
            closed += budget_reservations_close(turn_id=turn_id)
    return closed
