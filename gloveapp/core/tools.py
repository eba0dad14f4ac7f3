"""Tools: a capability the model can call, with validated input.

A tool is a `Tool` with a pydantic input model (or a raw JSON schema) and an async `run`
function, or a plain async function turned into one by `@tool`, whose signature becomes the
input model and whose docstring becomes the description:

    @tool
    async def check_stock(product: str) -> dict:
        "Look up how many bags of a coffee are in stock."
        return {"product": product, "bags": 0}

A parameter annotated `ToolContext` (or named `ctx`) receives the call's context: the display
manager bound to this tool, the store, the abort signal and the call id.

`run` may return a `ToolResultData` (used verbatim) or any other value, which becomes
`ToolResultData(status="success", data=value)` like glove-react's `defineTool`.

What people read of a call is declared beside it too: `label` is the tool's name in plain
words ("Checkout"), and `summary(args)` says what a call with these arguments will do
("Checkout: 6 x Colombia Huila, $96.00, pay at pickup"), as a `CallSummary` or a string. The
pages show those instead of the tool's name and its JSON arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model

from gloveapp.core.abort import AbortSignal
from gloveapp.core.approvals.policy import ApprovalPolicy
from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.store import StoreAdapter
from gloveapp.core.types import ToolResultData

DisplayStrategy = Literal["stay", "hide-on-complete", "hide-on-new"]
DISPLAY_STRATEGIES: tuple[str, ...] = ("stay", "hide-on-complete", "hide-on-new")

ToolRun = Callable[[Any, "ToolContext"], Awaitable[Any]]
MAX_SUMMARY = 500


@dataclass(frozen=True, slots=True)
class CallSummary:
    """How a pending call reads to people (a tool's `summary` returns one, or a string).

    `text` is what staff read ("Checkout: 6 x Colombia Huila, $96.00, pay at pickup");
    `customer` what the customer reads, when it should differ (no staff-only details);
    `total` the one figure staff scan a queue for ("$96.00"), if the call has one."""

    text: str
    customer: str | None = None
    total: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "customer": self.customer or self.text, "total": self.total}


def _clip(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"


def humanize_name(name: str) -> str:
    """A tool name in plain words: `add_to_cart` -> "Add to cart"."""
    words = name.replace("__", " ").replace("_", " ").replace("-", " ").split()
    return " ".join(words).capitalize() if words else name


@dataclass(slots=True)
class ToolContext:
    """What a running tool can reach besides its input."""

    tool_name: str
    call_id: str | None
    display: Any  # a BoundDisplay from gloveapp.core.display (push_and_wait / push_and_forget)
    store: StoreAdapter
    abort: AbortSignal | None = None


@dataclass(slots=True)
class Tool:
    name: str
    description: str
    run: ToolRun
    input_model: type[BaseModel] | None = None
    json_schema: dict[str, Any] | None = None
    requires_permission: bool | Callable[[Any], bool] = False
    un_abortable: bool = False
    display_strategy: DisplayStrategy = "stay"
    # Colocated renderers (Django templates): the slot a push renders with, and the template
    # that shows a past result from `render_data` after a reload.
    slot_template: str | None = None
    result_template: str | None = None
    # False for a tool with effects that must not happen twice (a payment, an order): when
    # its worker died after running it but before storing its result, the retried turn gives
    # the call an error result instead of running it again.
    retry_safe: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    # A person decides before each run (approve, edit, reject, respond): `core.approvals`.
    approval: ApprovalPolicy | None = None
    # The JSON Schema of the answer the tool's slot waits for (`push_and_wait`): clients of
    # the REST API read it beside the slot to know what to send; None: any JSON.
    slot_answer_schema: dict[str, Any] | None = None

    # What people read instead of the name and the JSON: the tool's name in plain words, and
    # `summary(args)` -> CallSummary | str | None for one call (a sync function: the Django
    # side calls it outside the event loop, so it may read the database).
    label: str | None = None
    summary: Callable[[dict[str, Any]], CallSummary | str | None] | None = field(
        default=None, compare=False
    )

    def __post_init__(self) -> None:
        if self.display_strategy not in DISPLAY_STRATEGIES:
            raise ValueError(
                f"display_strategy must be one of {', '.join(DISPLAY_STRATEGIES)}, "
                f"got {self.display_strategy!r}"
            )

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema sent to the model."""
        if self.json_schema is not None:
            return self.json_schema
        if self.input_model is not None:
            return model_json_schema(self.input_model)
        return {"type": "object", "properties": {}}

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema()
        )

    @property
    def display_label(self) -> str:
        return self.label or humanize_name(self.name)

    def summarize(self, args: Any) -> CallSummary | None:
        """The call as people read it, or None (no `summary`, or it failed on these
        arguments: the pages then show the arguments as they are)."""
        if self.summary is None or not isinstance(args, dict):
            return None
        try:
            made = self.summary(args)
        except Exception:
            return None
        if isinstance(made, str) and made.strip():
            return CallSummary(text=_clip(made))
        if isinstance(made, CallSummary) and made.text.strip():
            return CallSummary(
                text=_clip(made.text),
                customer=_clip(made.customer) if made.customer else None,
                total=_clip(made.total) if made.total else None,
            )
        return None

    def needs_permission(self, args: Any) -> bool:
        """Does this call need the customer's permission? The executor passes the arguments
        as the tool will receive them when they are valid (`executor.as_received`)."""
        gate = self.requires_permission
        return bool(gate(args)) if callable(gate) else bool(gate)


def model_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A pydantic model's JSON schema without pydantic's `title` noise."""
    return cast(dict[str, Any], _strip_titles(model.model_json_schema()))


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _strip_titles(value)
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_strip_titles(value) for value in node]
    return node


def _is_context_param(name: str, annotation: Any) -> bool:
    return annotation is ToolContext or name == "ctx"


def tool(
    func: Callable[..., Awaitable[Any]] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_permission: bool | Callable[[Any], bool] = False,
    un_abortable: bool = False,
    display_strategy: DisplayStrategy = "stay",
    slot_template: str | None = None,
    result_template: str | None = None,
    retry_safe: bool = True,
    approval: ApprovalPolicy | None = None,
    slot_answer_schema: dict[str, Any] | None = None,
    label: str | None = None,
    summary: Callable[[dict[str, Any]], CallSummary | str | None] | None = None,
) -> Any:
    """Turn an async function into a `Tool` (usable bare or with options)."""

    def build(fn: Callable[..., Awaitable[Any]]) -> Tool:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {fn.__name__!r} must be an async function")
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        context_param: str | None = None
        for param in inspect.signature(fn).parameters.values():
            annotation = hints.get(param.name, Any)
            if _is_context_param(param.name, annotation):
                context_param = param.name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, default)
        input_model = create_model(
            f"{fn.__name__}_input", __config__=ConfigDict(extra="ignore"), **fields
        )

        async def run(validated: BaseModel, ctx: ToolContext) -> Any:
            kwargs = {key: getattr(validated, key) for key in fields}
            if context_param is not None:
                kwargs[context_param] = ctx
            return await fn(**kwargs)

        return Tool(
            name=name or fn.__name__,
            description=description or inspect.cleandoc(fn.__doc__ or ""),
            run=run,
            input_model=input_model,
            requires_permission=requires_permission,
            un_abortable=un_abortable,
            display_strategy=display_strategy,
            slot_template=slot_template,
            result_template=result_template,
            retry_safe=retry_safe,
            approval=approval,
            slot_answer_schema=slot_answer_schema,
            label=label,
            summary=summary,
        )

    if func is not None:
        return build(func)
    return build


def as_tool_result(value: Any) -> ToolResultData:
    """Wrap a tool's return value the way glove-react's `defineTool` does."""
    if isinstance(value, ToolResultData):
        return value
    if isinstance(value, dict) and "status" in value and "data" in value:
        return ToolResultData.from_dict(value)
    return ToolResultData(status="success", data=value)
