"""Reading approvals: the queues of the page and the REST list, one request, its view.

Queues ("views"): `mine` (assigned to me, or escalated to me), `groups` (to one of my
groups, or escalated to one), `unassigned` (the shared queue), `overdue` (past its reminder
or escalation time), `all`. Each is one indexed query, newest requests last, paginated.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils import timezone

from gloveapp.agents.labels import call_summary
from gloveapp.approvals.access import is_approver, is_request_id, may_decide
from gloveapp.approvals.models import ApprovalDecision, ApprovalRequest
from gloveapp.core.approvals.decisions import EDIT
from gloveapp.core.approvals.edits import args_changes, change_sentence
from gloveapp.lib import keyset
from gloveapp.lib.paging import Cursor

VIEWS = ("mine", "groups", "unassigned", "overdue", "all")
STATUSES = (*ApprovalRequest.Status.values, "any")
MAX_PAGE = 200
# The deepest offset a list may ask for: an offset reads every row it skips (page by
# `after_cursor` instead).
MAX_OFFSET = 10_000


def group_ids(user: Any) -> set[int]:
    return set(user.groups.values_list("pk", flat=True))


def approvals_queue(
    *, user: Any, view: str = "all", status: str = "open", now: datetime | None = None
) -> QuerySet[ApprovalRequest]:
    """The requests of one queue as `user` (an approver) sees it; ValueError for an
    unknown view or status."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}")
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}")
    rows = ApprovalRequest.objects.all()
    if status != "any":
        rows = rows.filter(status=status)
    escalated = Q(escalated_at__isnull=False)
    if view == "mine":
        rows = rows.filter(Q(assignee_user=user) | (escalated & Q(escalate_to_user=user)))
    elif view == "groups":
        groups = user.groups.values("pk")  # a subquery: no round trip of its own
        rows = rows.filter(
            Q(assignee_group__in=groups) | (escalated & Q(escalate_to_group__in=groups))
        )
    elif view == "unassigned":
        rows = rows.filter(assignee_user__isnull=True, assignee_group__isnull=True)
    elif view == "overdue":
        now = now or timezone.now()
        rows = rows.filter(Q(remind_at__lte=now) | Q(escalate_at__lte=now) | escalated)
    return rows.order_by("created_at", "id")


def after_cursor(
    rows: QuerySet[ApprovalRequest], cursor: Cursor | None
) -> QuerySet[ApprovalRequest]:
    """A queue (ordered by created_at, id) from just after `cursor`'s row on: a keyset page,
    which starts with one probe of the queue's (…, created_at, id) index at any depth."""
    if cursor is None:
        return rows
    return rows.filter(keyset.after(cursor))


def page_of(rows: QuerySet[ApprovalRequest], *, offset: int, limit: int) -> list[ApprovalRequest]:
    """`limit + 1` rows of a queue from `offset` (one more: is there a next page?). The ids
    first, in one narrow ordered index range scan, then those rows with their session and
    customer, then the people they are assigned or escalated to, each kind by its ids (no
    statement for a kind none of the rows names). Joined in one statement, four
    `LEFT JOIN`s to the users and groups left the planner a choice it took by the tables'
    size: with many users it hashed the whole table twice for one page (the figures:
    docs/explanation/scale.md); by ids each is an index probe at any size."""
    ids = list(rows.values_list("pk", flat=True)[offset : offset + limit + 1])
    found = (
        rows.model.objects.select_related("session__owner")
        .prefetch_related(*_ASSIGNED)
        .in_bulk(ids)
    )
    return [found[pk] for pk in ids if pk in found]


_ASSIGNED = ("assignee_user", "assignee_group", "escalate_to_user", "escalate_to_group")
_PEOPLE = (*_ASSIGNED, "session__owner")


def queue_rows(
    *, user: Any, view: str, offset: int, limit: int
) -> tuple[list[dict[str, Any]], bool]:
    """A page of a queue as the page's list shows it: `limit` rows from `offset` (and whether
    there are more), each a subset of `approval_data` (id, tool, status, assignee,
    escalation, expiry). One statement whatever the queue's length: the page's ids (one
    ordered index range scan, `limit + 1` of them) as a subquery, then only those rows'
    shown columns, the people's names joined to them alone."""
    ids = approvals_queue(user=user, view=view).values("pk")[offset : offset + limit + 1]
    username = f"__{get_user_model().USERNAME_FIELD}"
    columns = (
        "created_at",
        "pk",
        "tool_name",
        "status",
        "expires_at",
        "escalated_at",
        "assignee_user" + username,
        "assignee_group__name",
        "escalate_to_user" + username,
        "escalate_to_group__name",
        "label",
        "summary",
        "total",
        "session__owner" + username,
        "session__title",
    )
    found = sorted(ApprovalRequest.objects.filter(pk__in=ids).values_list(*columns))
    now = timezone.now()
    rows = []
    for values in found[:limit]:
        _, pk, tool, status, expires_at, escalated_at, user_name, group, to_user, to_group = values[
            :10
        ]
        label, summary, total, customer, title = values[10:]
        open_ = status == ApprovalRequest.Status.OPEN
        rows.append(
            {
                "id": str(pk),
                "tool": tool,
                "label": label or None,
                "summary": summary or None,
                "total": total or None,
                "customer": customer or None,
                "sessionTitle": title or None,
                "status": status,
                "assignee": {"user": user_name, "group": group},
                "escalateTo": {"user": to_user, "group": to_group},
                "escalatedAt": _iso(escalated_at),
                "expiresAt": _iso(expires_at),
                "secondsLeft": (
                    max(0, int((expires_at - now).total_seconds()))
                    if open_ and expires_at is not None
                    else None
                ),
            }
        )
    return rows, len(found) > limit


def approval_visible(*, user: Any, request_id: Any) -> ApprovalRequest | None:
    """The request if `user` may see it (any approver), else None, exists or not."""
    if not is_approver(user):
        return None
    if not is_request_id(request_id):
        return None
    return ApprovalRequest.objects.select_related(*_PEOPLE).filter(pk=request_id).first()


def approval_for_system(*, request_id: Any) -> ApprovalRequest | None:
    """The request by id for a caller that is no person (a signed webhook)."""
    if not is_request_id(request_id):
        return None
    return ApprovalRequest.objects.filter(pk=request_id).first()


def decision_of(row: ApprovalRequest) -> ApprovalDecision | None:
    if row.status != ApprovalRequest.Status.DECIDED:
        return None
    return ApprovalDecision.objects.filter(request_id=row.pk).first()


def seconds_left(row: ApprovalRequest, now: datetime | None = None) -> int | None:
    if row.expires_at is None or row.status != ApprovalRequest.Status.OPEN:
        return None
    now = now or timezone.now()
    return max(0, int((row.expires_at - now).total_seconds()))


def approval_data(
    row: ApprovalRequest,
    *,
    user: Any,
    decision: ApprovalDecision | None = None,
    group_ids: set[int] | None = None,
) -> dict[str, Any]:
    """A request as staff read it (the REST body, the page's context)."""
    return {
        "id": str(row.pk),
        "sessionId": row.session_id,
        "tool": row.tool_name,
        "label": row.label or None,
        "summary": row.summary or None,
        "total": row.total or None,
        "customer": row.session.owner.get_username() if row.session.owner else None,
        "sessionTitle": row.session.title or None,
        "callId": row.call_id or None,
        "args": row.args,
        "fingerprint": row.fingerprint,
        "decisions": list(row.decisions),
        "inputSchema": row.input_schema,
        "status": row.status,
        "assignee": {
            "user": row.assignee_user.get_username() if row.assignee_user else None,
            "group": row.assignee_group.name if row.assignee_group else None,
        },
        "escalateTo": {
            "user": row.escalate_to_user.get_username() if row.escalate_to_user else None,
            "group": row.escalate_to_group.name if row.escalate_to_group else None,
        },
        "createdAt": row.created_at.isoformat(),
        "remindAt": _iso(row.remind_at),
        "escalateAt": _iso(row.escalate_at),
        "escalatedAt": _iso(row.escalated_at),
        "expiresAt": _iso(row.expires_at),
        "onExpire": row.on_expire,
        "secondsLeft": seconds_left(row),
        "mayDecide": row.status == ApprovalRequest.Status.OPEN
        and may_decide(user, row, group_ids=group_ids),
        "decision": describe(decision) if decision is not None else None,
        "approved": _approved(row, decision),
    }


DECISION_WORDS = {
    "approve": "Approved",
    "edit": "Approved with changes",
    "reject": "Rejected",
    "respond": "Answered instead",
}


def _approved(row: ApprovalRequest, decision: ApprovalDecision | None) -> dict[str, Any] | None:
    """What ran after an edit, in the tool's words: its summary and total for the approved
    arguments (the request keeps those it was opened with)."""
    if decision is None or decision.args is None or decision.args == row.args:
        return None
    summary = call_summary(row.session.agent_name, row.tool_name, decision.args)
    if summary is None:
        return None
    return {"summary": summary.text, "total": summary.total}


def describe(decision: ApprovalDecision) -> dict[str, Any]:
    """A decision as the API, the page and a 409 name it."""
    return {
        "decision": decision.kind,
        "decisionLabel": DECISION_WORDS.get(decision.kind, decision.kind),
        "by": decision.username or None,
        "channel": decision.channel,
        "decidedAt": decision.decided_at.isoformat(),
        "fingerprint": decision.fingerprint_seen,
        "args": decision.args,
        "reason": decision.reason or None,
        "text": decision.text or None,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def staff_word(group_name: str | None) -> str:
    """How a customer is told who decided, never a staff member's name: the group's
    member in the singular ("baristas" -> "A barista"), else "A staff member"."""
    name = (group_name or "").strip().replace("_", " ")
    if not name:
        return "A staff member"
    one = name[:-1] if name.endswith("s") and not name.endswith("ss") else name
    return f"{'An' if one[:1].lower() in 'aeiou' else 'A'} {one.lower()}"


def session_edits(session_id: str, call_ids: Iterable[str]) -> dict[str, list[str]]:
    """Tool call id -> what staff changed before it ran, as the customer reads it ("A
    barista changed the quantity of Colombia Huila from 6 to 4."), for the calls `call_ids`
    (those one page shows): one query of `approval_session_edit_idx`, which holds the
    edited decisions alone (a long chat's other decided requests are never read)."""
    wanted = sorted({call_id for call_id in call_ids if call_id})
    if not wanted:
        return {}
    rows = (
        ApprovalRequest.objects.filter(
            session_id=session_id,
            call_id__in=wanted,
            status=ApprovalRequest.Status.DECIDED,
            decision=EDIT,
        )
        .select_related("decision_row", "assignee_group", "escalate_to_group")
        .order_by("created_at")
    )
    edits: dict[str, list[str]] = {}
    for row in rows:
        decided = getattr(row, "decision_row", None)
        if decided is None or decided.args is None:
            continue
        escalated = row.escalated_at is not None and row.escalate_to_group is not None
        group = row.escalate_to_group if escalated else row.assignee_group
        sentence = change_sentence(
            staff_word(group.name if group else None), args_changes(row.args, decided.args)
        )
        if sentence:
            edits.setdefault(row.call_id, []).append(sentence)
    return edits


def awaited_by_slot(session_id: str) -> dict[str, tuple[str, str]]:
    """The session's open requests by the public id of the slot that waits on them
    (`t<turn>-<slot>`): (who is awaited, in words: "a barista", or the assignee's name;
    what: "checkout"), for the pages to name the wait."""
    rows = ApprovalRequest.objects.filter(
        session_id=session_id, status=ApprovalRequest.Status.OPEN, turn_id__isnull=False
    ).select_related("assignee_user", "assignee_group")[:20]
    awaited = {}
    for row in rows:
        if row.assignee_user is not None:
            who = row.assignee_user.get_username()
        else:
            who = staff_word(row.assignee_group.name if row.assignee_group else None).lower()
        awaited[f"t{row.turn_id}-{row.slot_id}"] = (who, row.label or row.tool_name)
    return awaited
