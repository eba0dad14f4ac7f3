from __future__ import annotations

import dataclasses
from typing import Any

from gloveapp.approvals.services import approval_open
from gloveapp.core.approvals.policy import ApprovalPolicy, approval_prompt
from tests.approvals.agents import ORDER, place_order


def open_request(session_id: str, *, args: dict | None = None, **policy: Any):
    """A request as a running turn opens it (no turn waits on it: service-level tests)."""
    tool = place_order
    if policy:
        tool = dataclasses.replace(place_order, approval=ApprovalPolicy(**policy))
    prompt = approval_prompt(tool, args or ORDER, tool.approval)
    return approval_open(session_id=session_id, prompt=prompt)
