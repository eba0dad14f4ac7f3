"""One recorded conversation run again against an agent version, in memory.

The agent is the version's (`spec.versioned_spec`) on an in-memory store, so the recording
is never written to. The customer's messages are sent as they were, one turn each; every
tool the agent calls is answered from the result it returned the first time (matched by tool
name and arguments, `recording.call_key`). A call the recording never saw is marked in the
outcome and answered with an error the model reads; or, if the operator chose the sandbox
(`UNSEEN_SANDBOX`), the tool itself runs, inside a transaction the run always rolls back
(`runs`). Nothing else runs for real: no approval prompt (a call whose policy applies is
noted as an approval asked), no handoff.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from gloveapp.agents.config import AgentSpec, configured_model, model_prices, model_spec
from gloveapp.agents.handoff_config import handoff_of
from gloveapp.core.builtin_tools import REQUEST_HUMAN_TOOL_NAME, create_request_human_tool
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.display import DisplayManager
from gloveapp.core.glove import Glove
from gloveapp.core.providers.base import no_notify
from gloveapp.core.store import MemoryStore
from gloveapp.core.tools import Tool, ToolContext, as_tool_result
from gloveapp.core.types import Message, ToolResultData
from gloveapp.observe import tracing
from gloveapp.observe.cost import Usage, total_cost
from gloveapp.versions.recording import Recording, TurnOutcome, call_key, outcomes_of

UNRECORDED_CALL = "Replay: the recording has no result for this call (tool and arguments)."
# What a replay does with a call the recording never saw: mark it (answered with an error),
# or run the tool in a sandbox (its database writes rolled back; nothing else is undone).
UNSEEN_MARK = "mark"
UNSEEN_SANDBOX = "run-sandbox"
UNSEEN_MODES = (UNSEEN_MARK, UNSEEN_SANDBOX)


class RecordedAnswers:
    """The recording's tool results, handed out in the order they were returned; a call
    asked more often than recorded gets the last result again."""

    def __init__(self, results: dict[str, list[ToolResultData]]) -> None:
        self._results = {key: list(values) for key, values in results.items()}
        self._used: dict[str, int] = {}

    def answer(self, tool_name: str, args: Any) -> ToolResultData | None:
        key = call_key(tool_name, args)
        results = self._results.get(key)
        if not results:
            return None
        index = self._used.get(key, 0)
        self._used[key] = index + 1
        return results[min(index, len(results) - 1)]


@dataclasses.dataclass(slots=True)
class _Log:
    """What the replayed turn did besides its messages."""

    approvals: list[str] = dataclasses.field(default_factory=list)
    unrecorded: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = ""


class _CountingModel:
    """The version's model, each call traced and its tokens counted into the turn's log."""

    def __init__(self, inner: Any, log: list[_Log], provider: str) -> None:
        self._inner = inner
        self._log = log
        self._provider = provider

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def prompt(self, messages: Any, tools: Any, notify: Any, abort: Any = None) -> Any:
        result = await traced_call(self._inner, self._provider, messages, tools, notify, abort)
        current = self._log[-1]
        current.tokens_in += result.tokens_in or 0
        current.tokens_out += result.tokens_out or 0
        current.model = getattr(self._inner, "name", "") or current.model
        return result


def _replayed_tool(tool: Tool, answers: RecordedAnswers, log: list[_Log], unseen: str) -> Tool:
    """`tool` as the model sees it (name, description, schema), answered from the
    recording; its approval noted, never asked."""
    policy = tool.approval

    async def run(args: Any, context: ToolContext) -> ToolResultData:
        if policy is not None and _applies(policy, args):
            log[-1].approvals.append(tool.name)
        recorded = answers.answer(tool.name, args)
        if recorded is None:
            if unseen == UNSEEN_SANDBOX:
                log[-1].unrecorded.append({"tool": tool.name, "args": args, "sandbox": True})
                return await _run_in_sandbox(tool, args, context)
            log[-1].unrecorded.append({"tool": tool.name, "args": args})
            return ToolResultData.error(UNRECORDED_CALL)
        return recorded

    return dataclasses.replace(
        tool,
        run=run,
        # The raw arguments, as the recording keys them; the schema the model sees stays.
        input_model=None,
        json_schema=tool.input_schema(),
        approval=None,
        requires_permission=False,
        retry_safe=True,
    )


async def _run_in_sandbox(tool: Tool, args: Any, context: ToolContext) -> ToolResultData:
    """The tool itself, on the raw arguments as its executor would validate them, in a
    savepoint of the conversation's transaction (`runs`, which rolls it all back): a tool
    that fails half-way leaves nothing of its own, and the next call finds the
    transaction usable."""
    savepoint = await sync_to_async(transaction.savepoint_create)()
    try:
        validated = tool.input_model.model_validate(args) if tool.input_model else args
        result = as_tool_result(await tool.run(validated, context))
    except Exception as error:  # as the executor: the model reads the failure
        await sync_to_async(_undo_call)(savepoint)
        return ToolResultData.error(f"{type(error).__name__}: {error}"[:2000])
    await sync_to_async(transaction.savepoint_commit)(savepoint)
    return result


def _undo_call(savepoint: str) -> None:
    # The ORM marked the conversation's transaction for rollback as the error passed
    # (`mark_for_rollback_on_error`), which refuses even the rollback to the savepoint;
    # back at the savepoint, the transaction is usable again.
    transaction.set_rollback(False)
    transaction.savepoint_rollback(savepoint)


def _applies(policy: Any, args: Any) -> bool:
    try:
        return bool(policy.applies(args))
    except Exception:
        return True  # as the executor: a rule that fails asks


def _handoff_tool(answers: RecordedAnswers, log: list[_Log]) -> Tool:
    async def hand_off(reason: str) -> str:
        recorded = answers.answer(REQUEST_HUMAN_TOOL_NAME, {"reason": reason})
        if recorded is None:
            log[-1].unrecorded.append({"tool": REQUEST_HUMAN_TOOL_NAME, "args": {"reason": reason}})
            return UNRECORDED_CALL
        data = recorded.data
        return str(data.get("message", "")) if isinstance(data, dict) else str(data or "")

    return create_request_human_tool(hand_off)


async def replay_conversation(
    recording: Recording, spec: AgentSpec, *, unseen: str = UNSEEN_MARK
) -> list[TurnOutcome]:
    """The recording's customer messages answered again by `spec`, turn by turn; `unseen`:
    what a call the recording never saw does (`UNSEEN_MODES`)."""
    answers = RecordedAnswers(recording.results)
    log: list[_Log] = [_Log()]
    model = _CountingModel(
        configured_model(spec=spec.model, model_settings=spec.model_settings),
        log,
        (spec.model or model_spec()).partition(":")[0].strip().lower(),
    )
    store = MemoryStore()
    glove = Glove(
        store=store,
        model=model,
        display_manager=DisplayManager(),
        system_prompt=spec.system_prompt,
        compaction_config=CompactionConfig(compaction_instructions=spec.compaction_instructions),
    )
    for tool in spec.tools:
        glove.fold(_replayed_tool(tool, answers, log, unseen))
    if handoff_of(spec).tool:
        glove.fold(_handoff_tool(answers, log))
    glove.build()
    prices = model_prices()
    outcomes: list[TurnOutcome] = []
    for recorded in recording.turns:
        log.append(_Log())
        before = len(await store.get_messages())
        await glove.process_request(recorded.customer)
        new = (await store.get_messages())[before:]
        turns, _ = outcomes_of(new)
        outcome = turns[0] if turns else TurnOutcome(customer=recorded.customer)
        current = log[-1]
        outcome.approvals = current.approvals
        outcome.unrecorded = current.unrecorded
        outcome.tokens = current.tokens_in + current.tokens_out
        cost = total_cost([(current.model, Usage(current.tokens_in, current.tokens_out))], prices)
        outcome.cost = str(cost.amount) if cost.amount is not None else None
        outcomes.append(outcome)
    return outcomes


async def traced_call(
    model: Any,
    provider: str,
    messages: list[Message],
    tools: Any = None,
    notify: Any = no_notify,
    abort: Any = None,
) -> Any:
    """One model call of a replay, as a `chat {model}` span (the GenAI conventions, as a
    turn's calls are traced; never the prompt's or the answer's text)."""
    name = getattr(model, "name", "") or provider
    with tracing.child_span(
        f"chat {name}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": name,
        },
    ) as span:
        try:
            result = await model.prompt(messages, tools, notify, abort)
        except Exception as error:
            if span is not None:
                span.set_attribute("error.type", type(error).__name__)
                span.set_status(tracing.error_status(type(error).__name__))
            raise
        if span is not None:
            span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": result.tokens_in or 0,
                    "gen_ai.usage.output_tokens": result.tokens_out or 0,
                    "gen_ai.response.finish_reasons": [result.stop_reason or ""],
                }
            )
        return result
