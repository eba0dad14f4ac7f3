"""Who may see and who may decide an approval request.

Staff see every request (the shared queue is everyone's); a request is decided by its
assignee, a member of its group, its escalation user or group once escalated, any staff
member when nobody is assigned, or a superuser; never by the person who asked
for it (four eyes), unless GLOVE_APPROVAL_SELF_APPROVAL. Anyone else is an outsider: every
route answers them as if the request did not exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings

from gloveapp.approvals.models import ApprovalRequest


def is_approver(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def is_request_id(value: Any) -> bool:
    """Could `value` name a request (a UUID)? Anything else is simply not found."""
    if isinstance(value, uuid.UUID):
        return True
    try:
        uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return False
    return True


def asked_by(user: Any, row: ApprovalRequest) -> bool:
    """Whether `user` is the person who asked for the request."""
    return row.requested_by_id is not None and row.requested_by_id == getattr(user, "pk", None)


def may_decide(user: Any, row: ApprovalRequest, *, group_ids: set[int] | None = None) -> bool:
    """`group_ids`: the user's groups, when the caller already read them (a list)."""
    if not is_approver(user):
        return False
    if asked_by(user, row) and not settings.GLOVE_APPROVAL_SELF_APPROVAL:
        return False  # superusers too: a second person decides what one asked for
    if user.is_superuser:
        return True
    unassigned = row.assignee_user_id is None and row.assignee_group_id is None
    if unassigned or row.assignee_user_id == user.pk:
        return True
    groups = group_ids if group_ids is not None else set(user.groups.values_list("pk", flat=True))
    if row.assignee_group_id in groups:
        return True
    if row.escalated_at is not None:
        return row.escalate_to_user_id == user.pk or row.escalate_to_group_id in groups
    return False
