"""An edit: the arguments a person gives instead of the agent's, checked against the tool's
input schema and the store's JSON bounds; and what it changed, in words staff read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from gloveapp.core import input_rules
from gloveapp.core.approvals.decisions import DecisionRefused, canonical_json

# An edit is stored like any JSON a client sends (`input_rules`' bounds on unknown fields).
MAX_EDIT_BYTES = input_rules.MAX_EXTRA_BYTES  # 256 KiB
MAX_EDIT_DEPTH = input_rules.MAX_EXTRA_DEPTH  # 32 levels


def validate_edit(tool: Any, args: Any) -> dict[str, Any]:
    """The edited arguments, checked against `tool`'s (a `tools.Tool`) input schema and the
    store's JSON bounds: an object, at most MAX_EDIT_DEPTH levels and MAX_EDIT_BYTES, no key
    the schema does not name (unless it allows more: `additionalProperties`), and valid
    for the tool's input. DecisionRefused (field "args") names what is wrong. Returns them
    as given (the tool validates again as it runs)."""
    if not isinstance(args, dict):
        raise DecisionRefused("args must be an object", field="args")
    if input_rules.json_depth(args, cap=MAX_EDIT_DEPTH) > MAX_EDIT_DEPTH:
        raise DecisionRefused(f"args nest deeper than {MAX_EDIT_DEPTH} levels", field="args")
    try:
        size = len(canonical_json(args).encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError) as error:
        raise DecisionRefused(f"args must be JSON: {error}", field="args") from None
    if size > MAX_EDIT_BYTES:
        raise DecisionRefused(
            f"args take {size} bytes; an edit takes at most {MAX_EDIT_BYTES}", field="args"
        )
    unknown = unknown_key(tool.input_schema(), args)
    if unknown is not None:
        raise DecisionRefused(
            f"args.{unknown} is not an argument of {tool.name}", field=f"args.{unknown}"
        )
    if tool.input_model is not None:
        try:
            _validated(tool.input_model, args)
        except ValidationError as error:
            raise DecisionRefused(
                f"args do not fit {tool.name}'s input: {_first(error)}", field="args"
            ) from None
    elif tool.json_schema is not None:
        import jsonschema

        try:
            jsonschema.validate(args, tool.json_schema)
        except jsonschema.ValidationError as error:
            raise DecisionRefused(
                f"args do not fit {tool.name}'s input: {error.message}", field="args"
            ) from None
        except jsonschema.SchemaError:
            pass  # the tool's own schema is broken: its run reports it
    return args


def unknown_key(schema: Any, value: Any) -> str | None:
    """The path of the first key in `value` that the JSON `schema` neither names nor allows
    (`additionalProperties` / `patternProperties`), or None. An object schema that names no
    properties at all is free-form. `$ref`s into `$defs` are followed; a value fits a union
    when it fits one of its branches. Call with a value whose depth is bounded."""
    root = schema if isinstance(schema, dict) else {}

    def resolve(node: Any, seen: int = 0) -> dict[str, Any]:
        if not isinstance(node, dict):
            return {}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and seen < 32:
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            return resolve(target, seen + 1)
        return node

    def walk(node: Any, item: Any, path: str) -> str | None:
        node = resolve(node)
        branches = [
            branch
            for word in ("anyOf", "oneOf")
            for branch in (node.get(word) or [])
            if isinstance(node.get(word), list)
        ]
        branches = [branch for branch in branches if _may_be(resolve(branch), item)]
        if branches:
            misfits = [walk(branch, item, path) for branch in branches]
            return None if None in misfits else misfits[0]
        found: str | None
        for part in node.get("allOf") or []:
            found = walk(part, item, path)
            if found is not None:
                return found
        if isinstance(item, dict):
            properties = node.get("properties")
            extra = node.get("additionalProperties")
            if not isinstance(properties, dict):
                if isinstance(extra, dict):
                    for key, value in item.items():
                        found = walk(extra, value, f"{path}{key}.")
                        if found is not None:
                            return found
                return None
            for key, value in item.items():
                if key in properties:
                    found = walk(properties[key], value, f"{path}{key}.")
                elif isinstance(extra, dict):
                    found = walk(extra, value, f"{path}{key}.")
                elif extra is True or node.get("patternProperties"):
                    found = None
                else:
                    return f"{path}{key}"
                if found is not None:
                    return found
        elif isinstance(item, list):
            items = node.get("items")
            if isinstance(items, dict):
                for index, value in enumerate(item):
                    found = walk(items, value, f"{path}{index}.")
                    if found is not None:
                        return found
        return None

    return walk(root, value, "")


_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
    "integer": int,
    "number": (int, float),
}


def _may_be(node: dict[str, Any], item: Any) -> bool:
    """Whether a union branch could describe `item` at all (by its declared JSON type)."""
    declared = node.get("type")
    if declared is None:
        return True
    names = declared if isinstance(declared, list) else [declared]
    return any(isinstance(item, _JSON_TYPES.get(name, object)) for name in names)


def _validated(model: type[BaseModel], args: dict[str, Any]) -> BaseModel:
    return model.model_validate(args)


def _first(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "input"
    return f"{where}: {first.get('msg', 'invalid')}"


# -- what an edit changed --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ArgChange:
    """One argument a person changed: its path (`lines.0.quantity`), how people name it
    ("the quantity of Colombia Huila") and the values before and after."""

    path: str
    label: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "label": self.label, "before": self.before, "after": self.after}


def _row_title(row: Any) -> str:
    if isinstance(row, dict):
        return next((cell for cell in row.values() if isinstance(cell, str) and cell), "")
    return ""


def args_changes(before: Any, after: Any) -> list[ArgChange]:
    """What an edit changed, leaf by leaf: top-level arguments, and the cells of a list of
    objects (an order's lines) named by the row's first text ("the quantity of Kenya AA")."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [] if before == after else [ArgChange("", "the arguments", before, after)]
    changes: list[ArgChange] = []
    for key in [*before, *[k for k in after if k not in before]]:
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        words = str(key).replace("_", " ")
        if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
            for index, (old_row, new_row) in enumerate(zip(old, new, strict=True)):
                if old_row == new_row:
                    continue
                if isinstance(old_row, dict) and isinstance(new_row, dict):
                    title = _row_title(old_row)
                    for cell in [*old_row, *[c for c in new_row if c not in old_row]]:
                        if old_row.get(cell) != new_row.get(cell):
                            of = f" of {title}" if title and old_row.get(cell) != title else ""
                            changes.append(
                                ArgChange(
                                    f"{key}.{index}.{cell}",
                                    f"the {str(cell).replace('_', ' ')}{of}",
                                    old_row.get(cell),
                                    new_row.get(cell),
                                )
                            )
                else:
                    changes.append(ArgChange(f"{key}.{index}", f"the {words}", old_row, new_row))
            continue
        changes.append(ArgChange(str(key), f"the {words}", old, new))
    return changes


def _shown(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return value.replace("_", " ")
    if isinstance(value, dict | list):
        return canonical_json(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def change_sentence(who: str, changes: list[ArgChange]) -> str:
    """ "A barista changed the quantity of Colombia Huila from 6 to 4." """
    if not changes:
        return ""
    parts = [f"{c.label} from {_shown(c.before)} to {_shown(c.after)}" for c in changes]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{who} changed {listed}."
