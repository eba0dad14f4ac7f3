"""An agent as a version makes it: the code's factory is the base, the version overrides
what it sets. One function each way: a version applied to a spec, and a spec's values as the
first version of an agent (what the admin's first draft starts from). A version's budgets
are not part of the spec: they are rules the turn's model calls count under
(`budget_rules`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gloveapp.agents.config import AgentSpec
from gloveapp.budgets.rules import Rule, version_rules
from gloveapp.core.approvals.policy import ApprovalPolicy
from gloveapp.core.tools import Tool
from gloveapp.versions.models import AgentVersion

# What a version holds, in the order the diff lists it.
VERSION_FIELDS = (
    "system_prompt",
    "model",
    "model_settings",
    "tools",
    "mcp_servers",
    "approval_policies",
    "budgets",
)
# The approval parameters a version may set (`ApprovalPolicy`'s, less its `when` rule,
# which is code).
POLICY_FIELDS = tuple(f.name for f in dataclasses.fields(ApprovalPolicy) if f.name not in ("when",))


def versioned_spec(base: AgentSpec, version: AgentVersion | None) -> AgentSpec:
    """`base` (the factory's agent) as `version` sets it; `base` itself without one."""
    if version is None:
        return base
    tools = list(base.tools)
    if version.tools is not None:
        offered = set(version.tools)
        tools = [tool for tool in tools if tool.name in offered]
    policies = version.approval_policies or {}
    tools = [_with_policy(tool, policies.get(tool.name)) for tool in tools]
    mcp_servers = list(base.mcp_servers)
    if version.mcp_servers is not None:
        servers = set(version.mcp_servers)
        mcp_servers = [raw for raw in mcp_servers if _server_name(raw) in servers]
    return dataclasses.replace(
        base,
        system_prompt=version.system_prompt,
        model=version.model or base.model,
        model_settings={**base.model_settings, **(version.model_settings or {})},
        tools=tools,
        mcp_servers=mcp_servers,
    )


def _with_policy(tool: Tool, params: Mapping[str, Any] | None) -> Tool:
    if not params:
        return tool
    known = policy_params(params)
    policy = (
        dataclasses.replace(tool.approval, **known)
        if tool.approval is not None
        else ApprovalPolicy(**known)
    )
    return dataclasses.replace(tool, approval=policy)


def policy_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A version's approval parameters as `ApprovalPolicy` takes them (lists as tuples)."""
    known = {key: value for key, value in params.items() if key in POLICY_FIELDS}
    for key in ("decisions", "staff_only"):
        if isinstance(known.get(key), list):
            known[key] = tuple(known[key])
    return known


def _server_name(raw: Any) -> str:
    return str(raw.get("name", "")) if isinstance(raw, Mapping) else ""


def spec_values(spec: AgentSpec) -> dict[str, Any]:
    """What the code says, as a version's fields: the start of an agent's first draft."""
    return {
        "system_prompt": spec.system_prompt,
        "model": spec.model,
        "model_settings": dict(spec.model_settings),
        "tools": [tool.name for tool in spec.tools],
        "mcp_servers": [_server_name(raw) for raw in spec.mcp_servers],
        "approval_policies": {
            tool.name: policy_values(tool.approval)
            for tool in spec.tools
            if tool.approval is not None
        },
        # The code declares budgets in GLOVE_BUDGETS and the admin, never per version.
        "budgets": [],
    }


def policy_values(policy: ApprovalPolicy) -> dict[str, Any]:
    values = {name: getattr(policy, name) for name in POLICY_FIELDS}
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in values.items()
        if value not in (None, ())
    }


def budget_rules(version: AgentVersion | None) -> tuple[Rule, ...]:
    """The budgets a turn on `version` counts under, beside the admin's and the settings'."""
    if version is None or not version.budgets:
        return ()
    return version_rules(version.agent_name, version.budgets)


def version_values(version: AgentVersion) -> dict[str, Any]:
    return {name: getattr(version, name) for name in VERSION_FIELDS}
