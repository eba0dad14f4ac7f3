"""Serializers for Glove's wire types, shared by the REST remote store's views.

They only validate shape: field names are glove-core's (`tool_calls`, `input_args`,
`activeForm`, ...), so a glove-react client's JSON passes unchanged. Turning the validated
data into runtime objects is `to_core_*` below; no business rules live here.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.fields import Field, SkipField, empty, get_error_detail

from gloveapp.core import input_rules
from gloveapp.core.approvals.inbox import INBOX_DECISIONS
from gloveapp.core.input_rules import ExtraFieldError, check_extra_fields
from gloveapp.core.types import (
    INBOX_STATUSES,
    TASK_STATUSES,
    TOOL_STATUSES,
    InboxItem,
    Message,
    Task,
    parse_iso,
)
from gloveapp.lib import paging

_PLAIN_GET_VALUE = (
    Field.get_value,
    serializers.Serializer.get_value,
    serializers.ListSerializer.get_value,
)


class WireObject(serializers.Serializer):
    """A Glove wire object (a message and its parts), validated at less cost per field.

    A POST validates one per message, and DRF's loop costs about 100 µs for a message that
    sends two of its ten fields (a SkipField raised and caught for each absent one). This is
    DRF's `Serializer.to_internal_value` loop with what does not change between calls worked
    out once per instance (`validated` keeps one per thread): the writable fields, their
    `validate_<name>` methods, and which of them DRF would skip when the key is absent,
    skipped without raising. Anything but a plain dict goes through DRF's own loop. The one
    copy of a DRF internal here, compared with DRF's loop by tests/api/test_drf_exceptions.py.
    """

    def to_internal_value(self, data: Any) -> Any:
        if type(data) is not dict:
            return super().to_internal_value(data)
        plan = self.__dict__.get("_plan")
        if plan is None:
            partial = getattr(self.root, "partial", False)
            plan = self._plan = [
                (
                    field,
                    field.field_name,
                    type(field).get_value in _PLAIN_GET_VALUE,
                    not field.required and field.default is empty and not partial,
                    # Absent, not required, a plain default: DRF's answer is that default.
                    not field.required
                    and field.default is not empty
                    and not callable(field.default)
                    and not partial,
                    getattr(self, "validate_" + field.field_name, None),
                )
                for field in self._writable_fields
            ]
        validated: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for field, name, plain, skip_absent, default_absent, validate_method in plan:
            if plain:
                if name not in data:
                    if skip_absent:
                        continue
                    if default_absent and validate_method is None:
                        self.set_value(validated, field.source_attrs, field.default)
                        continue
                primitive = data.get(name, empty)
            else:
                primitive = field.get_value(data)
            try:
                value = field.run_validation(primitive)
                if validate_method is not None:
                    value = validate_method(value)
            except serializers.ValidationError as exc:
                errors[name] = exc.detail
            except DjangoValidationError as exc:
                errors[name] = get_error_detail(exc)
            except SkipField:
                pass
            else:
                self.set_value(validated, field.source_attrs, value)
        if errors:
            raise serializers.ValidationError(errors)
        return validated

    def run_validators(self, value: Any) -> None:
        if self.validators:
            super().run_validators(value)


_per_thread = threading.local()


def validated(serializer_class: type[serializers.BaseSerializer], data: Any) -> Any:
    """`serializer_class(data=data)`'s validated data, or DRF's ValidationError (a 400).

    DRF builds a serializer's field tree anew for every instance (a deep copy: about 0.7 ms
    for a list of messages, more than the rest of a POST); a route's input and query
    serializers hold no state of a call, so each thread builds one of each and runs DRF's
    own `run_validation` (what `is_valid` runs) on it. Only for serializers without context
    or instance. Pinned to `is_valid` by tests/api/test_drf_exceptions.py.
    """
    built = _per_thread.__dict__.setdefault("serializers", {})
    serializer = built.get(serializer_class)
    if serializer is None:
        serializer = built[serializer_class] = serializer_class()
    return serializer.run_validation(data)


def _reject_unstorable(value: Any) -> None:
    # The input rules' NUL / lone-surrogate check, as a 400 naming the field (not a 500 from
    # the driver or an event the channel layer cannot send).
    path, problem = input_rules.first_unstorable(value)
    if problem:
        raise serializers.ValidationError(f"{path or 'value'} must not contain {problem}")


class JsonValueField(serializers.JSONField):
    """Any JSON value PostgreSQL's jsonb can hold."""

    def to_internal_value(self, data: Any) -> Any:
        # Before anything walks it: a thousand levels would be a RecursionError (a 500).
        limit = input_rules.MAX_JSON_DEPTH
        if input_rules.json_depth(data, cap=limit) > limit:
            raise serializers.ValidationError(f"must not be nested more than {limit} levels deep")
        value = super().to_internal_value(data)
        _reject_unstorable(value)
        return value


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans (DRF's CharField turns 5 into "5";
    glove-core's types, and zod, say string)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class TextField(StrictCharField):
    """Free text kept exactly as sent (DRF trims by default; Glove does not)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)


class IsoTimestampField(serializers.CharField):
    """An ISO 8601 timestamp kept as the string Glove sent (it is printed into prompts)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 64)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        try:
            moment = parse_iso(text)
        except (ValueError, OverflowError) as exc:
            raise serializers.ValidationError("must be an ISO 8601 timestamp") from exc
        if not 1 <= moment.year <= 9998:
            raise serializers.ValidationError("must be an ISO 8601 timestamp")
        return text


def status_field(choices: tuple[str, ...], **kwargs: Any) -> serializers.ChoiceField:
    """A status choice whose error reads like the runtime's own ValueError."""
    message = f'status must be one of {", ".join(choices)}, got "{{input}}"'
    return serializers.ChoiceField(
        choices=list(choices), error_messages={"invalid_choice": message}, **kwargs
    )


class KeepsUnknownKeys(WireObject):
    """A Glove object whose unknown keys are kept verbatim instead of dropped.

    Known fields are validated as usual (a bad type is a 400 naming it); the rest must be
    storable JSON within the bounds of `gloveapp.core.input_rules`, and pass through
    unchanged so the store can return them (glove-core 4.1.0's `provider_options`, ...).
    """

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        extra = {key: item for key, item in data.items() if key not in self.fields}
        if extra:
            for key, item in extra.items():
                path, problem = input_rules.first_unstorable(item, key)
                if problem:
                    raise serializers.ValidationError({key: [f"{path} must not contain {problem}"]})
            try:
                check_extra_fields(extra, "")
            except ExtraFieldError as exc:
                raise serializers.ValidationError({exc.key: [str(exc)]}) from None
            value.update(extra)
        return value


class SourceSerializer(KeepsUnknownKeys):
    type = serializers.ChoiceField(choices=["base64", "url"])
    media_type = StrictCharField(max_length=200)
    data = TextField(required=False)
    url = TextField(required=False)


class ContentPartSerializer(KeepsUnknownKeys):
    type = serializers.ChoiceField(choices=["text", "image", "video", "document"])
    text = TextField(required=False, allow_blank=True)
    source = SourceSerializer(required=False)


class ToolCallSerializer(KeepsUnknownKeys):
    id = StrictCharField(required=False, max_length=200)
    tool_name = StrictCharField(max_length=200)
    input_args = JsonValueField(required=False, allow_null=True)


class ToolResultDataSerializer(KeepsUnknownKeys):
    status = serializers.ChoiceField(choices=list(TOOL_STATUSES))
    data = JsonValueField(required=False, allow_null=True)
    message = TextField(required=False, allow_null=True, allow_blank=True)
    renderData = JsonValueField(required=False, allow_null=True)
    summary = TextField(required=False, allow_null=True, allow_blank=True)


class ToolResultSerializer(KeepsUnknownKeys):
    tool_name = StrictCharField(max_length=200)
    call_id = StrictCharField(required=False, allow_null=True, max_length=200)
    result = ToolResultDataSerializer()
    duration_ms = serializers.IntegerField(required=False, allow_null=True, min_value=0)


def list_of(child: serializers.Serializer, **kwargs: Any) -> serializers.ListSerializer:
    """`Child(many=True, ...)` whose items may not be null: `many=True` hands `allow_null`
    to the child as well, and a null item then reached the runtime as None (a 500)."""
    return serializers.ListSerializer(child=child, **kwargs)


class MessageSerializer(KeepsUnknownKeys):
    """glove-core's `Message` (§1.1 of the contract)."""

    sender = serializers.ChoiceField(choices=["user", "agent"])
    id = StrictCharField(required=False, allow_null=True, max_length=200)
    text = TextField(required=False, allow_blank=True, default="")
    content = list_of(ContentPartSerializer(), required=False, allow_null=True)
    tool_calls = list_of(ToolCallSerializer(), required=False, allow_null=True)
    tool_results = list_of(ToolResultSerializer(), required=False, allow_null=True)
    is_compaction = serializers.BooleanField(required=False, default=False)
    is_skill_injection = serializers.BooleanField(required=False, default=False)
    framework_context = StrictCharField(required=False, allow_null=True, max_length=50)
    reasoning_content = TextField(required=False, allow_null=True, allow_blank=True)


class TaskSerializer(serializers.Serializer):
    """glove-core's `Task`: `{id, content, activeForm, status}`."""

    id = serializers.CharField(max_length=200)
    content = TextField()
    activeForm = TextField(required=False, allow_blank=True, default="")
    status = status_field(TASK_STATUSES, default="pending")


class InboxItemSerializer(serializers.Serializer):
    """glove-core's `InboxItem` (snake_case on the wire, as Glove sends it)."""

    id = serializers.CharField(max_length=128)
    tag = serializers.CharField(max_length=200)
    request = TextField()
    response = TextField(required=False, allow_null=True, allow_blank=True, default=None)
    status = status_field(INBOX_STATUSES, default="pending")
    blocking = serializers.BooleanField(required=False, default=False)
    created_at = IsoTimestampField(required=False)
    resolved_at = IsoTimestampField(required=False, allow_null=True, default=None)
    # An addition to Glove (sent only when set): the decisions a person may take.
    decisions = serializers.ListField(
        child=serializers.ChoiceField(INBOX_DECISIONS),
        required=False,
        allow_null=True,
        max_length=3,
    )


class ClosedSchema(serializers.Serializer):
    """A request body whose fields are all known: an unknown one (a misspelt field, or one
    a client expects to do something, like `images` or `webhook`) is a 400 naming it
    instead of being dropped unread."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(key) for key in set(data) - set(self.fields))
            if unknown:
                message = f"unknown field(s): {', '.join(unknown)}; this route takes "
                message += ", ".join(sorted(self.fields)) + "."
                raise serializers.ValidationError({unknown[0]: [message]})
        return super().to_internal_value(data)


class RejectUnknownKeys(serializers.Serializer):
    """A partial update: unknown keys are an error, not silently dropped.

    The wording is the runtime stores' (`unknown inbox update field(s): tag`), so the
    `RemoteStore` raises the same message a `MemoryStore` would.
    """

    kind = "update"

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                message = f"unknown {self.kind} update field(s): {', '.join(unknown)}"
                raise serializers.ValidationError({unknown[0]: [message]})
        return super().to_internal_value(data)


class TaskUpdatesSerializer(RejectUnknownKeys):
    kind = "task"
    status = status_field(TASK_STATUSES, required=False)
    content = TextField(required=False)
    activeForm = TextField(required=False, allow_blank=True)


class InboxUpdatesSerializer(RejectUnknownKeys):
    kind = "inbox"
    status = status_field(INBOX_STATUSES, required=False)
    response = TextField(required=False, allow_null=True, allow_blank=True)
    resolved_at = IsoTimestampField(required=False, allow_null=True)


class ErrorSerializer(serializers.Serializer):
    """The one error shape (gloveapp/api/common/errors.py)."""

    error = serializers.CharField()
    field = serializers.CharField(required=False, allow_null=True)


class OkSerializer(serializers.Serializer):
    ok = serializers.BooleanField()


def to_core_message(data: dict[str, Any]) -> Message:
    # Only known fields sent as null are dropped; an unknown `null` is kept verbatim.
    return Message.from_dict(
        {k: v for k, v in data.items() if v is not None or k not in Message.KNOWN}
    )


def to_core_task(data: dict[str, Any]) -> Task:
    return Task.from_dict(data)


def to_core_inbox_item(data: dict[str, Any]) -> InboxItem:
    return InboxItem.from_dict(data)


def task_updates_to_core(data: dict[str, Any]) -> dict[str, Any]:
    """Glove's `activeForm` becomes the runtime's `active_form`."""
    updates = dict(data)
    if "activeForm" in updates:
        updates["active_form"] = updates.pop("activeForm")
    return updates


class CursorField(serializers.CharField):
    """A page's opaque cursor (`gloveapp.lib.paging`), handed back parsed; one the list named
    `listed` did not hand out (made up, or another list's) is a 400 naming the parameter."""

    def __init__(self, *, listed: str, tie: type = str, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        self.listed = listed
        self.tie = tie
        super().__init__(trim_whitespace=False, max_length=1000, **kwargs)

    def run_validation(self, data: Any = empty) -> paging.Cursor:
        text = super().run_validation(data)  # a string, its length checked
        try:
            cursor = paging.parse_cursor(text, listed=self.listed, tie=self.tie)
        except paging.PageParamError as exc:
            raise serializers.ValidationError("not a cursor this list handed out.") from exc
        if cursor is None:
            raise serializers.ValidationError("not a cursor this list handed out.")
        return cursor
