"""Running the tool calls of one model reply (glove-core's `Executor`, contract §2.3).

Calls run strictly one after another, in call order. Each gets exactly one `ToolResult`, except
that a tool aborted while it runs ends the batch: later calls get no result at all (the
formatters patch in `No result available`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import ValidationError

from gloveapp.core.abort import AbortSignal, race_abort
from gloveapp.core.approvals.decisions import (
    APPROVE,
    EDIT,
    Decision,
    DecisionRefused,
    check_decision,
    not_decided_message,
    outcome_without_run,
)
from gloveapp.core.approvals.edits import validate_edit
from gloveapp.core.approvals.permissions import permission_decision
from gloveapp.core.approvals.policy import approval_prompt
from gloveapp.core.display import (
    PERMISSION_RENDERER,
    BoundDisplay,
    DisplayManager,
    SlotRejectedError,
)
from gloveapp.core.events import TOOL_USE_RESULT, EventBus
from gloveapp.core.hooks import CallHooks
from gloveapp.core.results import MAX_TOOL_RESULT_BYTES, bound_result, keep_whole
from gloveapp.core.store import StoreAdapter, supports_permissions
from gloveapp.core.tools import Tool, ToolContext, as_tool_result
from gloveapp.core.types import AbortError, ToolCall, ToolResult, ToolResultData, json_safe
from gloveapp.core.validation import TOOL_INPUT_INVALID, validation_error_data

logger = logging.getLogger("gloveapp.core")

ABORTED_MESSAGE = "Tool execution was aborted by the user."
SUBAGENT_ABORTED_MESSAGE = "Subagent run aborted by the user."
# Named here, not imported: gloveapp.core.extensions builds on the executor's module.
SUBAGENT_TOOL_NAME = "glove_invoke_subagent"
SUBAGENT_INVOKED = "subagent_invoked"
SUBAGENT_COMPLETED = "subagent_completed"

# A permission prompt answered with this grants the one call without remembering the answer
# (an addition to Glove, where any truthy answer is stored as "granted" for that input).
PERMISSION_ONCE = "once"
# ... and this one refuses the one call without remembering it: the next call asks again.
PERMISSION_DENY_ONCE = "deny_once"

# hand_over(input, tool_name, call_id): show a slot and wait for the user's answer.
HandOver = Callable[[dict[str, Any], str | None, str | None], Awaitable[Any]]


def unknown_tool_message(name: str, available: list[str]) -> str:
    near = [known for known in available if known in name or name in known]
    message = f"No tool called {name} exists."
    if near:
        message += f" Did you mean {' or '.join(near)}?"
    if available:
        message += f" Available tools: {', '.join(available)}."
    else:
        message += " No tools are registered."
    return message


def permission_denied_message(name: str, reason: str | None = None) -> str:
    message = (
        f'Permission denied for tool "{name}". The user has not granted permission to run '
        "this tool."
    )
    # A rejection in the approvals vocabulary may carry the person's reason (not Glove's).
    return f"{message} Reason: {reason}" if reason else message


def js_error_string(error: BaseException) -> str:
    """What JS's `${error}` prints for an error: `Name: message`, or just the name."""
    message = str(error)
    name = type(error).__name__
    return f"{name}: {message}" if message else name


def failed_tool_message(error: BaseException, max_retries: int) -> str:
    return (
        f"Failed to run tool successfully. Tool Errored out with {js_error_string(error)}, "
        f"after {max_retries}/{max_retries} retries. ABORT EXECUTION"
    )


def _is_abort(error: BaseException) -> bool:
    return isinstance(error, AbortError | asyncio.CancelledError) or (
        type(error).__name__ == "AbortError"
    )


class ToolExecutor:
    def __init__(
        self,
        *,
        tools: list[Tool],
        store: StoreAdapter,
        events: EventBus,
        display_manager: Callable[[], DisplayManager],
        max_retries: int = 3,
        hooks: CallHooks | None = None,
        max_result_bytes: int = MAX_TOOL_RESULT_BYTES,
    ) -> None:
        self.tools = tools
        self.store = store
        self.events = events
        # Looked up per call (not captured when a tool is folded, Glove's §10.8 bug), so a
        # swapped display manager reaches every tool.
        self._display_manager = display_manager
        self.max_retries = max_retries
        self.hooks = hooks if hooks is not None else CallHooks()
        self.max_result_bytes = max_result_bytes

    async def _bounded(self, call: ToolCall, result: ToolResultData) -> ToolResultData:
        """The result within the cap (`core.results`); the whole goes to the store."""
        bounded, whole = bound_result(result, self.max_result_bytes)
        if whole is not None:
            logger.info(
                "the result of %s (%s bytes) was cut to %s bytes",
                call.tool_name,
                bounded.extra["truncated"]["bytes"],
                self.max_result_bytes,
            )
            try:
                await keep_whole(self.store, call_id=call.id, tool_name=call.tool_name, whole=whole)
            except Exception as error:
                logger.warning("the whole result of %s was not kept: %r", call.tool_name, error)
        return bounded

    def find(self, name: str) -> Tool | None:
        wanted = name.lower()
        return next((tool for tool in self.tools if tool.name.lower() == wanted), None)

    async def execute(
        self, calls: list[ToolCall], *, hand_over: HandOver, abort: AbortSignal | None
    ) -> list[ToolResult]:
        results: list[ToolResult] = []
        for call in calls:
            started = time.perf_counter()
            result, stop, ran = await self._execute_one(call, hand_over, abort)
            result = await self._bounded(call, _json_safe_result(result))
            tool_result = ToolResult(
                tool_name=call.tool_name,
                call_id=call.id,
                result=result,
                duration_ms=int((time.perf_counter() - started) * 1000),
            )
            results.append(tool_result)
            payload = {**tool_result.to_dict(), "id": call.id, "name": call.tool_name}
            if ran:
                # Glove fires these without awaiting (§2.5): the tool already ran, so a broken
                # subscriber must not lose its result. The skip-path ones are awaited.
                await self.events.emit_fire_and_forget(TOOL_USE_RESULT, payload)
                await self._close_subagent_bracket(call, result)
            else:
                await self.events.emit(TOOL_USE_RESULT, payload)
            if stop:
                break
        return results

    async def _execute_one(
        self, call: ToolCall, hand_over: HandOver, abort: AbortSignal | None
    ) -> tuple[ToolResultData, bool, bool]:
        """The call's result, whether the batch must stop (an in-tool abort), and whether the
        tool was run (its result is then emitted fire-and-forget)."""
        tool = self.find(call.tool_name)
        aborted = abort is not None and abort.aborted
        if aborted and not (tool is not None and tool.un_abortable):
            return _aborted(), False, False
        if tool is None:
            available = [known.name for known in self.tools]
            return (
                ToolResultData.error(unknown_tool_message(call.tool_name, available)),
                False,
                False,
            )
        # Gates (permission, approval policy) read the arguments as the tool will receive
        # them: validated and coerced by its schema, so `"quantity": "6"` is the 6 the tool
        # runs with, not a string a policy overlooks. Invalid input reaches the permission
        # gate as it came (Glove's order: permission, then validation) and no approval.
        received = as_received(tool, call.input_args)
        permission, reason = await self._permitted(tool, call, hand_over, abort, received)
        if permission == "aborted":
            return _aborted(), False, False
        if permission == "denied":
            message = permission_denied_message(call.tool_name, reason)
            return ToolResultData.error(message), False, False

        if received is not INVALID and tool.approval is not None and policy_applies(tool, received):
            # The request shows (and its fingerprint binds) the arguments that will run.
            call = dataclasses.replace(call, input_args=received)
            approved, outcome = await self._approved(tool, call, hand_over, abort)
            if outcome is not None:
                return outcome, False, False
            edited = as_received(tool, approved)
            if edited is not INVALID and edited != received:
                # A person's edit is a new call: the customer's own consent (the permission
                # prompt) is asked again for what will now run (pickup -> saved_card).
                call = dataclasses.replace(call, input_args=approved)
                permission, reason = await self._permitted(tool, call, hand_over, abort, edited)
                if permission == "aborted":
                    return _aborted(), False, False
                if permission == "denied":
                    message = permission_denied_message(call.tool_name, reason)
                    return ToolResultData.error(message), False, False
            # From here on the call is what the person approved (or edited), nothing else.
            call = dataclasses.replace(call, input_args=approved)

        validated: Any = call.input_args
        if tool.input_model is not None:
            try:
                validated = tool.input_model.model_validate(call.input_args)
            except ValidationError as error:
                data = validation_error_data(error, tool.input_model)
                return (
                    ToolResultData(status="error", message=TOOL_INPUT_INVALID, data=data),
                    False,
                    False,
                )

        await self._open_subagent_bracket(call)
        context = ToolContext(
            tool_name=tool.name,
            call_id=call.id,
            display=BoundDisplay(
                self._display_manager(),
                tool_name=tool.name,
                call_id=call.id,
                display_strategy=tool.display_strategy,
            ),
            store=self.store,
            abort=abort,
        )
        instead = await self.hooks.run_before_tool(call, tool)
        if instead is not None:
            result, stop = as_tool_result(instead), False
        else:
            result, stop = await self._run_with_retries(tool, validated, context, abort)
        if not stop:
            result = await self.hooks.run_after_tool(call, result)
        return result, stop, True

    # Glove's Executor brackets every run of the subagent dispatch tool, so subscribers see
    # `subagent_invoked` / `subagent_completed` in pairs whatever the run's outcome.
    async def _open_subagent_bracket(self, call: ToolCall) -> None:
        name = _subagent_name(call)
        if name is not None:
            prompt = call.input_args.get("prompt")
            await self.events.emit_fire_and_forget(
                SUBAGENT_INVOKED,
                {"name": name, "prompt": prompt if isinstance(prompt, str) else ""},
            )

    async def _close_subagent_bracket(self, call: ToolCall, result: ToolResultData) -> None:
        name = _subagent_name(call)
        if name is None:
            return
        payload: dict[str, Any] = {
            "name": name,
            "status": "success" if result.status == "success" else "error",
        }
        message = SUBAGENT_ABORTED_MESSAGE if result.status == "aborted" else result.message
        if message is not None:
            payload["message"] = message
        await self.events.emit_fire_and_forget(SUBAGENT_COMPLETED, payload)

    async def _permitted(
        self,
        tool: Tool,
        call: ToolCall,
        hand_over: HandOver,
        abort: AbortSignal | None,
        received: Any = None,
    ) -> tuple[Literal["allowed", "denied", "aborted"], str | None]:
        """Whether the call may run, and the reason a person gave for a rejection."""
        # Checked before validation, as Glove does; the gate reads the arguments as the tool
        # will receive them when they are valid (`received`), the raw ones otherwise. The
        # prompt and the remembered answer keep Glove's raw input.
        gated = call.input_args if received is INVALID or received is None else received
        if not permission_needed(tool, gated):
            return "allowed", None
        if not supports_permissions(self.store):
            return "allowed", None
        status = await self.store.get_permission(tool.name, call.input_args)
        if status == "granted":
            return "allowed", None
        if status == "denied":
            return "denied", None
        prompt = {
            "renderer": PERMISSION_RENDERER,
            "toolName": tool.name,
            "toolInput": call.input_args,
        }
        try:
            answer = await race_abort(hand_over(prompt, tool.name, call.id), abort)
        except AbortError:
            # Unlike Glove (§10.9) the prompt is abortable: its slot is taken off the stack and
            # the call gets the usual aborted result.
            return "aborted", None
        except Exception as error:
            # A rejected or removed prompt is a "no" for this call only: nothing is remembered,
            # and the tool_use still gets its result.
            if not isinstance(error, SlotRejectedError):
                logger.warning("permission prompt for %s failed: %r", tool.name, error)
            return "denied", None
        try:
            decided = permission_decision(answer)
        except DecisionRefused:
            return "denied", None  # a malformed decision is a no, for this call only
        if decided is not None:
            # approve = once, reject = deny once: neither is remembered.
            if decided["decision"] == APPROVE:
                return "allowed", None
            return "denied", decided["reason"]
        if answer == PERMISSION_ONCE:
            # Allowed for this call only: nothing remembered, the next call asks again.
            return "allowed", None
        if answer == PERMISSION_DENY_ONCE:
            return "denied", None
        allowed = bool(answer)
        await self.store.set_permission(
            tool.name, "granted" if allowed else "denied", call.input_args
        )
        return ("allowed" if allowed else "denied"), None

    async def _approved(
        self, tool: Tool, call: ToolCall, hand_over: HandOver, abort: AbortSignal | None
    ) -> tuple[Any, ToolResultData | None]:
        """Hand the call over for a person's decision (`core.approvals`): the arguments to
        run with, or a result that stands instead of running (reject, respond, refused,
        aborted). Nothing but a checked decision on this call's fingerprint runs the tool."""
        policy = tool.approval
        assert policy is not None
        try:
            prompt = approval_prompt(tool, call.input_args, policy)
        except (TypeError, ValueError) as error:
            why = f"its arguments are not JSON: {error}"
            return None, ToolResultData.error(not_decided_message(tool.name, why))
        try:
            answer = await race_abort(hand_over(prompt, tool.name, call.id), abort)
        except AbortError:
            return None, _aborted()
        except Exception as error:
            if not isinstance(error, SlotRejectedError):
                logger.warning("approval request for %s failed: %r", tool.name, error)
            why = "the request was withdrawn without a decision"
            return None, ToolResultData.error(not_decided_message(tool.name, why))
        try:
            decision = answer if isinstance(answer, Decision) else Decision.from_dict(answer)
            check_decision(decision, allowed=policy.decisions, current=prompt["fingerprint"])
            if decision.kind == EDIT:
                validate_edit(tool, decision.args)
        except DecisionRefused as error:
            return None, ToolResultData.error(not_decided_message(tool.name, str(error)))
        instead = outcome_without_run(tool.name, decision)
        if instead is not None:
            return None, instead
        return (decision.args if decision.kind == EDIT else call.input_args), None

    async def _run_with_retries(
        self, tool: Tool, validated: Any, context: ToolContext, abort: AbortSignal | None
    ) -> tuple[ToolResultData, bool]:
        def may_continue() -> bool:
            return abort is None or not abort.aborted or tool.un_abortable

        last_error: BaseException | None = None
        for _attempt in range(self.max_retries + 1):
            try:
                if not may_continue():
                    raise AbortError()
                value = await self._run_once(tool, validated, context, abort)
                return as_tool_result(value), False
            except Exception as error:
                last_error = error
                if _is_abort(error) or not may_continue():
                    break
        assert last_error is not None
        if _is_abort(last_error) or (abort is not None and abort.aborted):
            return _aborted(), True
        return ToolResultData.error(failed_tool_message(last_error, self.max_retries)), False

    async def _run_once(
        self, tool: Tool, validated: Any, context: ToolContext, abort: AbortSignal | None
    ) -> Any:
        if tool.un_abortable or abort is None:
            return await tool.run(validated, context)
        # Race the tool against the abort signal: an abort ends the wait at once, even when the
        # tool is waiting on the user, and cancels the tool.
        return await race_abort(tool.run(validated, context), abort)


INVALID: Any = object()  # `as_received`: the arguments do not fit the tool's input


def as_received(tool: Tool, args: Any) -> Any:
    """The arguments as `tool` will receive them (validated and coerced by its input model,
    as JSON: defaults filled in, unknown keys dropped), or INVALID. A JSON-schema tool
    (MCP) receives its arguments as they are."""
    if tool.input_model is None:
        return args
    try:
        return tool.input_model.model_validate(args).model_dump(mode="json", by_alias=True)
    except (ValidationError, TypeError, ValueError):
        return INVALID


def policy_applies(tool: Tool, args: Any) -> bool:
    """The tool's approval policy asks for this call. A policy that raises asks: a person
    decides (fail closed), and the log says why; the turn goes on."""
    assert tool.approval is not None
    try:
        return tool.approval.applies(args)
    except Exception as error:
        logger.warning(
            "the approval policy of %s raised %s; a person decides this call",
            tool.name,
            js_error_string(error),
        )
        return True


def permission_needed(tool: Tool, args: Any) -> bool:
    """The tool's permission gate asks for this call; a gate that raises asks (fail closed)."""
    try:
        return tool.needs_permission(args)
    except Exception as error:
        logger.warning(
            "the permission gate of %s raised %s; the customer is asked",
            tool.name,
            js_error_string(error),
        )
        return True


def _subagent_name(call: ToolCall) -> str | None:
    if call.tool_name != SUBAGENT_TOOL_NAME or not isinstance(call.input_args, dict):
        return None
    name = call.input_args.get("name")
    return name if isinstance(name, str) and name else None


def _json_safe_result(result: ToolResultData) -> ToolResultData:
    """The result with `data` and `render_data` made JSON-storable (`types.json_safe`).

    A tool that returns a Decimal, a datetime, a set, NaN, a pydantic model... has already run;
    its result must reach the store rather than make the append fail and be lost.
    """
    message, summary = result.message, result.summary
    return dataclasses.replace(
        result,
        data=json_safe(result.data),
        render_data=json_safe(result.render_data),
        message=message if message is None or isinstance(message, str) else str(message),
        summary=summary if summary is None or isinstance(summary, str) else str(summary),
    )


def _aborted() -> ToolResultData:
    return ToolResultData(status="aborted", message=ABORTED_MESSAGE, data=None)
