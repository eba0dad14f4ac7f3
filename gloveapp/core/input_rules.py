"""The input rules: what text, ids and JSON the system accepts, in one Django-free module.

Every edge (REST serializers, pages, websocket, commands) and every service checks input
with these, so a rule is written once: a NUL character (PostgreSQL refuses it), a lone
surrogate (no backend or channel layer can encode it as UTF-8), the column widths, the JSON
depth and size bounds. Functions raise ValueError naming the field; edges turn that into a
4xx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from gloveapp.core.types import parse_iso

# Column widths of the models, checked here so the database never truncates or refuses.
MAX_ID = 128
MAX_MSG_ID = 200
MAX_TAG = 200
MAX_TASK_ID = 200
MAX_FRAMEWORK_CONTEXT = 50


# The ids a client may choose for a new session (`POST /api/sessions`): URL-safe, and no
# wider than the column (`MAX_ID`). Sessions the server makes get a uuid.
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")

# The bound on one model call's token counts (a store's `add_tokens_consumed`): large enough
# for any real call, small enough that the 64-bit counters never overflow.
MAX_TOKENS_PER_CALL = 10**12


def contains_nul(text: str) -> bool:
    """PostgreSQL refuses U+0000 in text and jsonb (the driver raises before the query)."""
    return "\x00" in text


def utf8_encodable(text: str) -> bool:
    """False for a lone surrogate (U+D800-U+DFFF): no backend or channel layer can encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unstorable_text_problem(text: str) -> str:
    """What makes `text` unstorable ("NUL characters" / "lone surrogate characters"), or ""."""
    if contains_nul(text):
        return "NUL characters"
    if not utf8_encodable(text):
        return "lone surrogate characters"
    return ""


def could_name_a_row(value: str, *, max_length: int = 0) -> bool:
    """Whether an id from a URL could name a stored row at all (else: answer "not found").

    An id the database cannot hold is not sent to it: the driver would fail with a 500.
    """
    if max_length and len(value) > max_length:
        return False
    return not unstorable_text_problem(value)


def check_text(value: Any, field: str, *, allow_empty: bool = True, max_length: int = 0) -> str:
    """A string the database can hold: PostgreSQL refuses NUL characters outright, and a
    lone surrogate (U+D800-U+DFFF) is not encodable as UTF-8 by any backend or channel layer."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ValueError(f"{field} must not be empty")
    if max_length and len(value) > max_length:
        raise ValueError(f"{field} is longer than {max_length} characters")
    problem = unstorable_text_problem(value)
    if problem:
        raise ValueError(f"{field} must not contain {problem}")
    return value


def check_json(value: Any, field: str) -> Any:
    """JSON that every backend stores the same way (and the live relay can send): no
    NaN/Infinity, no NUL characters, no lone surrogates, in values or keys."""
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} is not storable as JSON: {exc}") from None
    # json.dumps always escapes control characters, so a NUL shows as `\u0000`; a lone
    # surrogate stays a raw code point, which UTF-8 cannot encode. Both are cheap tests of
    # the whole document; only a suspect one is walked to name the offending field.
    if "\\u0000" in encoded or not utf8_encodable(encoded):
        path, problem = first_unstorable(value, field)
        if problem:
            raise ValueError(f"{path} must not contain {problem}")
    return value


def first_unstorable(value: Any, path: str = "") -> tuple[str, str]:
    """Where in a JSON value the first NUL or lone surrogate is, and which: (path, problem).

    `problem` is "" when there is none. Keys are checked too (reported at their parent).
    Walked with a stack, not recursion: a hostile document thousands of levels deep must
    get its answer here, not a RecursionError (a 500).
    """
    pending: list[tuple[Any, str]] = [(value, path)]
    while pending:
        node, where = pending.pop()
        if isinstance(node, str):
            problem = unstorable_text_problem(node)
            if problem:
                return where, problem
        elif isinstance(node, dict):
            children = []
            for key, item in node.items():
                if isinstance(key, str) and unstorable_text_problem(key):
                    return where, unstorable_text_problem(key)
                children.append((item, f"{where}.{key}" if where else str(key)))
            pending.extend(reversed(children))  # first child on top: document order
        elif isinstance(node, (list, tuple)):
            pending.extend(reversed([(item, f"{where}[{i}]") for i, item in enumerate(node)]))
    return path, ""


def check_timestamp(value: Any, field: str) -> datetime:
    if isinstance(value, datetime):
        return parse_iso(value.isoformat())
    if not isinstance(value, str):
        raise ValueError(f"{field} must be an ISO 8601 timestamp string")
    try:
        return parse_iso(value)
    except ValueError:
        raise ValueError(f"{field} must be an ISO 8601 timestamp, got {value!r}") from None


def check_unique_task_ids(task_ids: list[str], field: str = "tasks") -> None:
    """A task list names each task once (its id is how `update_task` finds it)."""
    seen: set[str] = set()
    for task_id in task_ids:
        if task_id in seen:
            raise ValueError(f'{field}: the id "{task_id}" appears twice')
        seen.add(task_id)


# -- message fields the runtime does not interpret ----------------------------------------
# Stores keep every unknown key of Glove's message JSON verbatim (`Message.extra` and the
# `extra` of tool calls, tool results and content parts). Verbatim is not unbounded: one
# object's extra fields are capped in size and nesting depth, so an unknown key can never be
# the way to store what a known field would refuse.

# Generous for provider state (signed reasoning blobs run to tens of kB), small enough that
# a message cannot smuggle megabytes past the known fields' checks.
MAX_EXTRA_BYTES = 256 * 1024
MAX_EXTRA_DEPTH = 32
MAX_EXTRA_KEY_LENGTH = 200


class ExtraFieldError(ValueError):
    """An extra field out of bounds; `key` names it (relative to the object holding it)."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def check_extra_fields(extra: Mapping[str, Any], where: str) -> None:
    """Refuse (ExtraFieldError naming the field) extras that are not plain, bounded JSON."""
    total = 0
    for key, value in extra.items():
        path = f"{where}.{key}" if where else str(key)
        if not isinstance(key, str) or not key or len(key) > MAX_EXTRA_KEY_LENGTH:
            raise ExtraFieldError(
                f"{path}: field names must be 1 to {MAX_EXTRA_KEY_LENGTH} characters", str(key)
            )
        if json_depth(value, cap=MAX_EXTRA_DEPTH) > MAX_EXTRA_DEPTH:
            raise ExtraFieldError(f"{path} is nested deeper than {MAX_EXTRA_DEPTH} levels", key)
        try:
            encoded = json.dumps(value, allow_nan=False, ensure_ascii=False).encode()
        except (TypeError, ValueError, UnicodeEncodeError) as exc:
            raise ExtraFieldError(f"{path} is not storable as JSON: {exc}", key) from None
        total += len(encoded)
        if total > MAX_EXTRA_BYTES:
            raise ExtraFieldError(
                f"{path}: unknown fields may take at most {MAX_EXTRA_BYTES} bytes per object",
                key,
            )


# A JSON-valued field (a tool's input, a result's data, a permission's input, a chat tool's
# parameters) nests at most this deep: every walk over JSON (encoding, these checks, the
# database driver, the live relay) recurses, and Python stops near a thousand levels with a
# RecursionError, a 500. No Glove tool input or result comes near this.
MAX_JSON_DEPTH = 64


def json_depth(value: Any, *, cap: int) -> int:
    """How deep `value` nests lists/objects, counted up to just past `cap`.

    Iterative, so a hostile document cannot exhaust the stack here either.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            deepest = max(deepest, depth)
            if depth <= cap:
                stack.extend((item, depth + 1) for item in node.values())
        elif isinstance(node, list | tuple):
            deepest = max(deepest, depth)
            if depth <= cap:
                stack.extend((item, depth + 1) for item in node)
    return deepest
