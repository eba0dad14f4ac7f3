"""Reads of agent versions: what an agent runs on now, a version's spec, a diff."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from gloveapp.agents.config import AgentSpec, get_agent_spec
from gloveapp.budgets.rules import Rule, version_rules
from gloveapp.versions.models import AgentPointer, AgentVersion
from gloveapp.versions.spec import (
    VERSION_FIELDS,
    budget_rules,
    spec_values,
    version_values,
    versioned_spec,
)


@dataclass(frozen=True, slots=True)
class Published:
    """What an agent's next turn runs on: the version's id (None: the code's factory
    alone) and the budgets it declares."""

    version_id: int | None
    budget_rules: tuple[Rule, ...] = ()


def published_version(agent_name: str) -> Published:
    """The agent's published version and its budgets, in one probe of its pointer (every
    queued turn asks). `agent_name` is the agent's own (not empty for the default)."""
    row = (
        AgentPointer.objects.filter(agent_name=agent_name)
        .values_list("published_id", "published__budgets")
        .first()
    )
    if row is None or row[0] is None:
        return Published(None)
    return Published(row[0], version_rules(agent_name, row[1]) if row[1] else ())


def published_budget_rules() -> tuple[Rule, ...]:
    """The budgets of every agent's published version (one read: an agent pointer per agent
    in GLOVE_AGENTS), for the usage page and `/metrics`."""
    rows = (
        AgentPointer.objects.exclude(published=None)
        .order_by("agent_name")
        .values_list("agent_name", "published__budgets")
    )
    return tuple(rule for name, raw in rows if raw for rule in version_rules(name, raw))


def version_budget_rules(version_id: int | None) -> tuple[Rule, ...]:
    """The budgets of version `version_id` (none for None: the code's factory alone)."""
    if version_id is None:
        return ()
    return budget_rules(AgentVersion.objects.filter(pk=version_id).first())


def version_labels(ids: list[int | None]) -> dict[int | None, str]:
    """What people call each version ("coffee v3"), for the ids given (None: none)."""
    wanted = {pk for pk in ids if pk is not None}
    rows = AgentVersion.objects.filter(pk__in=wanted).values_list("pk", "agent_name", "number")
    return {pk: f"{name} v{number}" for pk, name, number in rows}


def pointer_of(agent_name: str) -> AgentPointer | None:
    return (
        AgentPointer.objects.select_related("draft", "published")
        .filter(agent_name=agent_name)
        .first()
    )


def agent_spec_at(agent_name: str, version_id: int | None) -> AgentSpec:
    """The agent as version `version_id` makes it (None: as the code says)."""
    base = get_agent_spec(agent_name)
    version = AgentVersion.objects.filter(pk=version_id).first() if version_id else None
    return versioned_spec(base, version)


def values_of(version: AgentVersion | None, agent_name: str) -> dict[str, Any]:
    """A version's fields; the code's own for None."""
    if version is None:
        return spec_values(get_agent_spec(agent_name))
    return version_values(version)


def as_text(values: dict[str, Any]) -> list[str]:
    """A version as the lines a diff compares: the prompt as it reads, the rest as JSON."""
    lines: list[str] = []
    for name in VERSION_FIELDS:
        value = values.get(name)
        lines.append(f"## {name}")
        if name == "system_prompt":
            lines += str(value or "").splitlines()
        else:
            lines += json.dumps(value, indent=2, sort_keys=True, default=str).splitlines()
    return lines


def version_diff(
    old: AgentVersion | None, new: AgentVersion, *, old_label: str = "", new_label: str = ""
) -> list[str]:
    """A unified diff of `new` against `old` (None: the code's factory), line by line."""
    return list(
        difflib.unified_diff(
            as_text(values_of(old, new.agent_name)),
            as_text(values_of(new, new.agent_name)),
            fromfile=old_label or (str(old) if old else f"{new.agent_name} (code)"),
            tofile=new_label or str(new),
            lineterm="",
        )
    )
