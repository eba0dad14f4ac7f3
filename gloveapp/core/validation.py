"""Tool input validation errors in the shape glove-core sends the model.

Glove validates tool input with zod and reports `z.treeifyError(error)` as JSON:

    {"errors":[],"properties":{"tag":{"errors":["Invalid input: expected string, received undefined"]}}}

Models have learnt to read that shape, so pydantic's errors are translated into it, with zod
4's English messages for the common issues (missing or mistyped fields, lengths, bounds,
enums). Less common pydantic errors keep pydantic's own message.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

TOOL_INPUT_INVALID = "TOOL_INPUT_INVALID"
VALIDATION_DATA_PREFIX = "Failed to validate the input args provided for the tool:: "

_EXPECTED_BY_ERROR_TYPE = {
    "string_type": "string",
    "int_type": "number",
    "int_parsing": "number",
    "int_from_float": "int",
    "float_type": "number",
    "float_parsing": "number",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "list_type": "array",
    "tuple_type": "array",
    "set_type": "set",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "none_required": "null",
}
_EXPECTED_BY_SCHEMA_TYPE = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
    "null": "null",
}


def js_type_name(value: Any) -> str:
    """zod's name for the type of a received value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def _js_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value).lower()


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(root.get("$defs", {}).get(ref.split("/")[-1], {}), root)
    variants = [v for v in node.get("anyOf", []) if v.get("type") != "null"]
    if len(variants) == 1:
        return _resolve(variants[0], root)
    return node


class _SchemaCursor:
    """Walks a pydantic error location through the model's JSON schema."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.root = schema

    def walk(self, loc: tuple[Any, ...]) -> tuple[list[str | int], dict[str, Any], bool]:
        """Return (zod path, schema node at the end, whether a union was crossed)."""
        node = _resolve(self.root, self.root)
        path: list[str | int] = []
        crossed_union = False
        for element in loc:
            if isinstance(element, int):
                path.append(element)
                node = _resolve(node.get("items", {}) or {}, self.root)
                continue
            properties = node.get("properties", {})
            if element in properties:
                path.append(element)
                node = _resolve(properties[element], self.root)
            elif "anyOf" in node or "oneOf" in node:
                # pydantic tags union branches in `loc`; zod reports one issue for the union.
                crossed_union = True
                break
            else:
                path.append(element)
                node = {}
        return path, node, crossed_union


def _enum_message(values: list[Any]) -> str:
    if len(values) == 1:
        return f"Invalid input: expected {_js_value(values[0])}"
    return "Invalid option: expected one of " + "|".join(_js_value(v) for v in values)


def _zod_message(error: ErrorDetails, node: dict[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    received = js_type_name(error.get("input"))
    if kind == "missing":
        if "enum" in node:
            return _enum_message(node["enum"])
        if "const" in node:
            return _enum_message([node["const"]])
        expected = _EXPECTED_BY_SCHEMA_TYPE.get(node.get("type", ""), "object")
        return f"Invalid input: expected {expected}, received undefined"
    if kind in ("literal_error", "enum"):
        values = node.get("enum") or ([node["const"]] if "const" in node else None)
        if values:
            return _enum_message(values)
    if kind in _EXPECTED_BY_ERROR_TYPE:
        return f"Invalid input: expected {_EXPECTED_BY_ERROR_TYPE[kind]}, received {received}"
    if kind == "string_too_short":
        return f"Too small: expected string to have >={ctx.get('min_length')} characters"
    if kind == "string_too_long":
        return f"Too big: expected string to have <={ctx.get('max_length')} characters"
    if kind == "too_short":
        return f"Too small: expected array to have >={ctx.get('min_length')} items"
    if kind == "too_long":
        return f"Too big: expected array to have <={ctx.get('max_length')} items"
    bounds = {
        "greater_than_equal": ("Too small", ">=", "ge"),
        "greater_than": ("Too small", ">", "gt"),
        "less_than_equal": ("Too big", "<=", "le"),
        "less_than": ("Too big", "<", "lt"),
    }
    if kind in bounds:
        label, operator, key = bounds[kind]
        return f"{label}: expected number to be {operator}{ctx.get(key)}"
    return str(error.get("msg", "Invalid input"))


def _node_at(tree: dict[str, Any], path: list[str | int]) -> dict[str, Any]:
    current = tree
    for element in path:
        if isinstance(element, str):
            properties = current.setdefault("properties", {})
            current = properties.setdefault(element, {"errors": []})
        else:
            items: list[Any] = current.setdefault("items", [])
            while len(items) <= element:
                items.append(None)  # JSON.stringify writes array holes as null
            if items[element] is None:
                items[element] = {"errors": []}
            current = items[element]
    return current


@lru_cache(maxsize=256)
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    # Building a pydantic JSON schema costs milliseconds; models are immutable classes.
    return model.model_json_schema()


def treeify_validation_error(error: ValidationError, model: type[BaseModel]) -> dict[str, Any]:
    """zod's `treeifyError` tree for a pydantic validation error."""
    cursor = _SchemaCursor(_schema_of(model))
    tree: dict[str, Any] = {"errors": []}
    unrecognized: dict[tuple[str | int, ...], list[str]] = {}
    seen_unions: set[tuple[str | int, ...]] = set()
    for issue in error.errors(include_url=False):
        loc = tuple(issue["loc"])
        if issue["type"] == "extra_forbidden":
            parent, _, _ = cursor.walk(loc[:-1])
            unrecognized.setdefault(tuple(parent), []).append(str(loc[-1]))
            continue
        path, node, crossed_union = cursor.walk(loc)
        if crossed_union:
            if tuple(path) in seen_unions:
                continue
            seen_unions.add(tuple(path))
            message = "Invalid input"
        else:
            message = _zod_message(issue, node)
        _node_at(tree, path)["errors"].append(message)
    for parent_loc, keys in unrecognized.items():
        noun = "key" if len(keys) == 1 else "keys"
        listed = ", ".join(json.dumps(key) for key in keys)
        _node_at(tree, list(parent_loc))["errors"].append(f"Unrecognized {noun}: {listed}")
    return tree


def validation_error_data(error: ValidationError, model: type[BaseModel]) -> str:
    """The `data` of a TOOL_INPUT_INVALID result, byte-for-byte like glove-core's."""
    tree = treeify_validation_error(error, model)
    return VALIDATION_DATA_PREFIX + json.dumps(tree, separators=(",", ":"), ensure_ascii=False)
