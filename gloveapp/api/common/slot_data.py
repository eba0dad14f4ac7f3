"""The slots of a session's turn as data, for every audience that shows them: what each asks,
who answers it (`answeredBy`) and the shape of its answer (`answerSchema`), and the check
of an answer against that shape (a 400 naming the field)."""

from __future__ import annotations

import logging
from typing import Any

import jsonschema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from gloveapp.agents.config import get_agent_spec
from gloveapp.conversations.models import Session
from gloveapp.core.approvals.policy import APPROVAL_RENDERER
from gloveapp.core.display import PERMISSION_RENDERER
from gloveapp.turns import selectors
from gloveapp.turns.permissions import PERMISSION_ANSWER_WORDS

logger = logging.getLogger(__name__)

PERMISSION_ANSWER_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "enum": list(PERMISSION_ANSWER_WORDS)},
        {
            "type": "object",
            "properties": {
                "decision": {"type": "string", "enum": ["approve", "reject"]},
                "reason": {"type": ["string", "null"]},
            },
            "required": ["decision"],
        },
    ]
}


class SlotOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Answer it at …/slots/<id>.")
    renderer = serializers.CharField(
        help_text="How it is shown: a tool's name (its own card), `permission_request`, "
        "`approval_request`, or a generic renderer."
    )
    input = serializers.JSONField(allow_null=True, help_text="What the slot shows.")
    toolName = serializers.CharField(source="tool_name", allow_null=True)
    callId = serializers.CharField(source="call_id", allow_null=True)
    displayStrategy = serializers.CharField(source="display_strategy")
    waitsForAnswer = serializers.BooleanField(
        source="waits_for_answer", help_text="False: a card that shows something and asks nothing."
    )
    answeredBy = serializers.ChoiceField(
        ["owner", "staff", "nobody"],
        help_text="owner: answer it here; staff: an approval, decided at /api/approvals/; "
        "nobody: it waits for no answer.",
    )
    answerSchema = serializers.JSONField(
        allow_null=True,
        help_text="JSON Schema of the `value` it expects (null: any JSON, or no answer).",
    )
    expired = serializers.BooleanField(help_text="Its turn ended before it was answered.")
    createdAt = serializers.CharField(source="created_at")


def check_answer(value: Any, schema: Any) -> None:
    """A 400 naming the field (`value.confirmed`) unless `value` fits the slot's declared
    `answerSchema` (none declared: any JSON)."""
    if not isinstance(schema, dict):
        return
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        problem = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except (jsonschema.exceptions.SchemaError, RecursionError):
        logger.warning("a tool's slot_answer_schema is not a valid JSON Schema")
        return
    if problem is None:
        return
    where = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem.absolute_path
    )
    raise ValidationError({f"value{where}": [f"Does not fit the answerSchema: {problem.message}"]})


def answer_schema(
    slot: selectors.SlotView | selectors.AnsweredSlot, tools: dict[str, Any] | None
) -> Any:
    if slot.renderer == PERMISSION_RENDERER:
        return PERMISSION_ANSWER_SCHEMA
    if not slot.waits_for_answer or slot.renderer == APPROVAL_RENDERER or not tools:
        return None
    tool = tools.get(slot.tool_name or "")
    return getattr(tool, "slot_answer_schema", None)


def agent_tools(session: Session) -> dict[str, Any] | None:
    try:
        spec = get_agent_spec(session.agent_name)
    except Exception:  # a misconfigured agent: the slots still read, without answer shapes
        return None
    return {tool.name: tool for tool in spec.tools}


def slots_as_data(session: Session) -> list[dict[str, Any]]:
    slots = selectors.visible_slots(session.pk)
    tools = agent_tools(session) if any(slot.waits_for_answer for slot in slots) else None
    rows = []
    for slot in slots:
        answered_by = "nobody"
        if slot.waits_for_answer:
            answered_by = "staff" if slot.renderer == APPROVAL_RENDERER else "owner"
        rows.append(
            {
                **slot.to_dict(),
                "answeredBy": answered_by,
                "answerSchema": answer_schema(slot, tools),
            }
        )
    return [dict(SlotOutputSerializer(row).data) for row in rows]
