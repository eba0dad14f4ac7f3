"""Every write of agent versions: a new draft, publishing, rolling back.

A version is never changed once written; editing a draft writes the next version and moves
the draft pointer to it. Publishing and rolling back move the published pointer, in one
conditional update checked for one row (two staff publishing at once: one wins, the other
is told), and each move is written down (`VersionPublication`). A turn reads the pointer
when it is queued (`selectors.published_version`), so a move takes effect on the next turn.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from gloveapp.agents.config import agent_names
from gloveapp.budgets.rules import RuleInvalid, version_rules
from gloveapp.core.approvals.policy import ApprovalPolicy
from gloveapp.versions.models import AgentPointer, AgentVersion, ReplayRun, VersionPublication
from gloveapp.versions.spec import POLICY_FIELDS, VERSION_FIELDS, policy_params

# `version_publish` without an expectation of what is published now.
UNCHECKED = object()


class VersionConflict(Exception):
    """The pointer moved meanwhile (someone else published), or there is nothing to do."""


class UnknownAgent(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"No agent called {name!r} is configured (GLOVE_AGENTS).")


def _checked_agent(agent_name: str) -> str:
    if agent_name not in agent_names():
        raise UnknownAgent(agent_name)
    return agent_name


def _checked_values(agent_name: str, values: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(values) - set(VERSION_FIELDS))
    if unknown:
        raise ValueError(f"unknown version field(s): {', '.join(unknown)}")
    if not isinstance(values.get("system_prompt", ""), str):
        raise ValueError("system_prompt must be text")
    for name in ("tools", "mcp_servers"):
        names = values.get(name)
        if names is not None and not (
            isinstance(names, list) and all(isinstance(item, str) for item in names)
        ):
            raise ValueError(f"{name} must be a list of names, or null for all the code's")
    for name in ("model_settings", "approval_policies"):
        if not isinstance(values.get(name) or {}, dict):
            raise ValueError(f"{name} must be an object")
    for tool_name, params in (values.get("approval_policies") or {}).items():
        if not isinstance(params, dict):
            raise ValueError("approval_policies maps each tool's name to its parameters")
        unknown = sorted(set(params) - set(POLICY_FIELDS))
        if unknown:
            raise ValueError(f"approval_policies[{tool_name!r}]: unknown {', '.join(unknown)}")
        try:
            ApprovalPolicy(**policy_params(params))
        except (TypeError, ValueError) as error:
            raise ValueError(f"approval_policies[{tool_name!r}]: {error}") from None
    try:
        version_rules(agent_name, values.get("budgets"))
    except RuleInvalid as error:
        raise ValueError(str(error)) from None
    if values.get("budgets", ()) is None:
        values = {**values, "budgets": []}
    return values


def version_draft(
    *, agent_name: str, author: Any = None, note: str = "", **values: Any
) -> AgentVersion:
    """Write the agent's next version from `values` (the fields of `spec.VERSION_FIELDS`;
    those left out are the current draft's) and make it the draft."""
    _checked_agent(agent_name)
    with transaction.atomic():
        pointer, _ = AgentPointer.objects.select_for_update().get_or_create(agent_name=agent_name)
        base = pointer.draft or pointer.published
        fields = {name: getattr(base, name) for name in VERSION_FIELDS} if base else {}
        fields.update(_checked_values(agent_name, values))
        if "system_prompt" not in fields:
            raise ValueError("the agent's first version needs its system_prompt")
        # Under the pointer's row lock: the numbers of one agent are given out one at a time.
        number = (
            AgentVersion.objects.filter(agent_name=agent_name).aggregate(top=Max("number"))["top"]
            or 0
        ) + 1
        version = AgentVersion.objects.create(
            agent_name=agent_name, number=number, author=author, note=note, **fields
        )
        pointer.draft = version
        pointer.save(update_fields=["draft", "updated_at"])
    return version


def version_publish(
    *,
    version: AgentVersion,
    by: Any = None,
    expected_published_id: Any = UNCHECKED,
    replay_run: ReplayRun | None = None,
    kind: str = VersionPublication.Kind.PUBLISHED,
) -> VersionPublication:
    """Make `version` the agent's published one (the next turn runs on it).

    With `expected_published_id`, only if the published pointer is still that (the page
    showed it): `VersionConflict` when someone moved it meanwhile."""
    agent_name = version.agent_name
    with transaction.atomic():
        pointer, _ = AgentPointer.objects.get_or_create(agent_name=agent_name)
        previous_id = pointer.published_id
        if expected_published_id is not UNCHECKED and expected_published_id != previous_id:
            raise VersionConflict(f"{agent_name}'s published version changed meanwhile.")
        if previous_id == version.pk:
            raise VersionConflict(f"{version} is already published.")
        # The race: two publishers read the same pointer; the update moves it for one only.
        moved = AgentPointer.objects.filter(agent_name=agent_name, published_id=previous_id).update(
            published_id=version.pk
        )
        if moved != 1:
            raise VersionConflict(f"{agent_name}'s published version changed meanwhile.")
        try:
            return VersionPublication.objects.create(
                agent_name=agent_name,
                version=version,
                previous_id=previous_id,
                kind=kind,
                by=by if getattr(by, "pk", None) else None,
                replay_run=replay_run,
            )
        except IntegrityError as error:  # pragma: no cover - a version row cannot vanish
            raise VersionConflict(str(error)) from error


def version_rollback(*, agent_name: str, by: Any = None) -> VersionPublication:
    """Publish again the version that was published before the current one."""
    last = VersionPublication.objects.filter(agent_name=agent_name).order_by("-id").first()
    pointer = AgentPointer.objects.filter(agent_name=agent_name).first()
    if last is None or pointer is None or last.version_id != pointer.published_id:
        raise VersionConflict(f"{agent_name} has no publication to roll back.")
    if last.previous is None:
        # Back to the code alone: the pointer empties.
        with transaction.atomic():
            moved = AgentPointer.objects.filter(
                agent_name=agent_name, published_id=last.version_id
            ).update(published_id=None)
            if moved != 1:
                raise VersionConflict(f"{agent_name}'s published version changed meanwhile.")
            return VersionPublication.objects.create(
                agent_name=agent_name,
                version=None,
                previous=last.version,
                kind=VersionPublication.Kind.ROLLED_BACK,
                by=by if getattr(by, "pk", None) else None,
            )
    return version_publish(
        version=last.previous,
        by=by,
        expected_published_id=last.version_id,
        kind=VersionPublication.Kind.ROLLED_BACK,
    )
