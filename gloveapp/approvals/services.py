"""Every write to approvals: open a request, decide it, withdraw it, hand it to its turn.

`approval_decide` is THE decision: the page, the admin, the REST API, signed links, expiry
and Python code in any process call it. It moves a request open -> decided in one
conditional UPDATE and writes its one `ApprovalDecision` (one-to-one, so the database refuses
a second), so of any number of concurrent deciders exactly one wins; the others learn who
did (`AlreadyDecided.winner`). A decision on another fingerprint than the request's is
refused (`StaleDecision`), and the waiting turn runs the tool only with a decision it reads
back from these rows (`decisions_for_turns`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string

from gloveapp.agents.labels import call_summary, tool_label
from gloveapp.approvals.access import asked_by, is_request_id, may_decide
from gloveapp.approvals.models import ApprovalDecision, ApprovalNotification, ApprovalRequest
from gloveapp.approvals.notifications import queue_notifications
from gloveapp.approvals.selectors import describe
from gloveapp.conversations.models import Session
from gloveapp.core import input_rules
from gloveapp.core.approvals.decisions import (
    EDIT,
    REJECT,
    RESPOND,
    Decision,
    DecisionRefused,
    StaleFingerprint,
    check_decision,
)
from gloveapp.core.approvals.edits import validate_edit
from gloveapp.core.approvals.policy import ApprovalPolicy, customer_view
from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.lib.turn_waking import wake_turn
from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import approvals_stream, session_stream

logger = logging.getLogger(__name__)
Status = ApprovalRequest.Status
Event = ApprovalNotification.Event
CHANNELS = tuple(ApprovalDecision.Channel.values)


class ApprovalNotFound(Exception):
    """No such request (or none the caller may see: the same answer)."""


class ApprovalConflict(Exception):
    """The decision lost: a 409. `winner` describes the decision that stands, if any."""

    def __init__(self, message: str, *, winner: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.winner = winner


class AlreadyDecided(ApprovalConflict):
    pass


class StaleDecision(ApprovalConflict):
    """The decision names another fingerprint than the request's."""


class DecisionInvalid(ValueError):
    """The decision is not allowed for the request or is malformed: a 400 naming `field`."""

    def __init__(self, message: str, *, field: str = "decision") -> None:
        super().__init__(message)
        self.field = field


class NotYoursToDecide(PermissionError):
    """The caller may see the request but not decide it (assigned to someone else)."""


# -- opening ---------------------------------------------------------------------------------
def approval_open(
    *,
    session_id: str,
    prompt: dict[str, Any],
    turn_id: int | None = None,
    slot_id: str = "",
    call_id: str | None = None,
    requested_by: Any = None,
    now: datetime | None = None,
) -> ApprovalRequest:
    """Store the request a running turn hands over (`core.approvals.policy.approval_prompt`):
    routed to its assignee (the router setting, else the tool's declaration), with its
    deadlines (per-tool setting, else the declaration, else the defaults). Call inside the
    transaction that stores the turn's prompt. `requested_by`: the person who asked, when
    one did (they may not decide it, `access.may_decide`)."""
    now = now or timezone.now()
    policy = ApprovalPolicy.from_dict(prompt.get("policy") or {})
    tool_name = str(prompt.get("toolName") or "")
    args = prompt.get("toolInput")
    remind, escalate, expire = _deadlines(tool_name, policy)
    agent_name = Session.objects.filter(pk=session_id).values_list("agent_name", flat=True).first()
    summary = call_summary(agent_name, tool_name, args)
    user_name, group_name = _route(
        {
            "session_id": session_id,
            "tool_name": tool_name,
            "args": args,
            "policy": policy,
        },
        policy,
    )
    with transaction.atomic():
        row = ApprovalRequest.objects.create(
            session_id=session_id,
            turn_id=turn_id,
            slot_id=slot_id or "",
            tool_name=tool_name,
            call_id=call_id or "",
            args=args,
            fingerprint=str(prompt.get("fingerprint") or ""),
            input_schema=prompt.get("inputSchema"),
            label=tool_label(agent_name, tool_name)[:200],
            summary=summary.text if summary else "",
            customer_summary=summary.customer or "" if summary else "",
            total=summary.total or "" if summary else "",
            decisions=list(policy.decisions),
            staff_only=list(policy.staff_only),
            assignee_user=_user(user_name),
            assignee_group=_group(group_name),
            escalate_to_user=_user(policy.escalate_to_user),
            escalate_to_group=_group(policy.escalate_to_group),
            created_at=now,
            remind_at=now + timedelta(seconds=remind) if remind else None,
            escalate_at=now + timedelta(seconds=escalate) if escalate else None,
            expires_at=now + timedelta(seconds=expire) if expire else None,
            on_expire=policy.on_expire,
            on_expire_text=policy.on_expire_text or "",
            requested_by=requested_by if getattr(requested_by, "pk", None) else None,
        )
        _announce(row, "approval.opened")
        if row.assignee_user_id or row.assignee_group_id:
            queue_notifications(row=row, event=Event.ASSIGNED, now=now)
    return row


def customer_prompt(prompt: dict[str, Any], row: ApprovalRequest | None = None) -> dict[str, Any]:
    """What the customer's page keeps of an approval prompt (no staff-only fields), with
    the call's label and the customer's summary of it when `row` (the stored request) has
    them."""
    shown = customer_view(prompt)
    if row is not None:
        shown["label"] = row.label or None
        shown["summary"] = row.customer_summary or row.summary or None
    return shown


def _deadlines(tool_name: str, policy: ApprovalPolicy) -> tuple[float, float, float]:
    declared = (policy.remind_after, policy.escalate_after, policy.expire_after)
    defaults = (
        settings.GLOVE_APPROVAL_REMIND_SECONDS,
        settings.GLOVE_APPROVAL_ESCALATE_SECONDS,
        settings.GLOVE_APPROVAL_EXPIRE_SECONDS,
    )
    configured = (settings.GLOVE_APPROVAL_TOOL_DEADLINES or {}).get(tool_name)
    if configured is not None:
        parts = [part.strip() for part in str(configured).split("/")]
        parts += [""] * (3 - len(parts))
        return tuple(_number(part) for part in parts[:3])  # type: ignore[return-value]
    return tuple(  # type: ignore[return-value]
        own if own is not None else float(default or 0)
        for own, default in zip(declared, defaults, strict=True)
    )


def _number(text: str) -> float:
    try:
        value = float(text) if text else 0.0
    except ValueError:
        return 0.0
    return value if value > 0 else 0.0


def _route(request: dict[str, Any], policy: ApprovalPolicy) -> tuple[str | None, str | None]:
    path = settings.GLOVE_APPROVAL_ROUTER
    if path:
        try:
            routed = import_string(path)(request)
        except Exception:
            logger.exception("GLOVE_APPROVAL_ROUTER %s failed; the tool's assignee stands", path)
            routed = None
        if isinstance(routed, dict):
            return routed.get("user"), routed.get("group")
    return policy.assignee_user, policy.assignee_group


def _user(username: str | None) -> Any:
    if not username:
        return None
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        logger.warning(
            "approval assignee %r is no active user; the request is unassigned", username
        )
    return user


def _group(name: str | None) -> Group | None:
    if not name:
        return None
    group = Group.objects.filter(name=name).first()
    if group is None:
        logger.warning("approval group %r does not exist; the request is unassigned", name)
    return group


# -- deciding --------------------------------------------------------------------------------
def approval_decide(
    *,
    request_id: Any,
    decision: Decision,
    channel: str,
    user: Any = None,
    now: datetime | None = None,
) -> ApprovalDecision:
    """Decide an open request, from any process sharing the database.

    `user` None is the system (expiry, Python code); a user must be allowed to decide it
    (`access.may_decide`: staff to whom, or to whose group, it is assigned, any staff for
    an unassigned one, superusers). Raises `ApprovalNotFound`, `NotYoursToDecide`,
    `DecisionInvalid` (a decision it does not allow, a bad edit), `StaleDecision` (another
    fingerprint) or `AlreadyDecided` (someone else won; `.winner` says who and what).
    """
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
    if user is not None and not getattr(user, "pk", None):
        raise ValueError("user must be a saved user (or None)")
    now = now or timezone.now()
    with transaction.atomic():
        row = (
            ApprovalRequest.objects.select_related("session").filter(pk=request_id).first()
            if is_request_id(request_id)
            else None
        )
        if row is None:
            raise ApprovalNotFound(str(request_id))
        if user is not None and not may_decide(user, row):
            if asked_by(user, row):
                raise NotYoursToDecide(
                    f"request {row.pk} is yours: someone else must decide what you asked for"
                )
            raise NotYoursToDecide(f"request {row.pk} is assigned to someone else")
        if row.status != Status.OPEN:
            raise _lost(row)
        try:
            _check_storable(decision)
            check_decision(decision, allowed=tuple(row.decisions), current=row.fingerprint)
            if decision.kind == EDIT:
                _check_edit(row, decision.args)
        except StaleFingerprint as error:
            raise StaleDecision(str(error), winner=None) from None
        except DecisionRefused as error:
            raise DecisionInvalid(str(error), field=error.field) from None
        # Race: deciders in other processes read "open" too. The status in the WHERE clause
        # makes the UPDATE the arbiter: the row lock it takes makes the others wait, then
        # match nothing, so exactly one decision is written (the one-to-one row backs it).
        claimed = ApprovalRequest.objects.filter(pk=row.pk, status=Status.OPEN).update(
            status=Status.DECIDED, decision=decision.kind, decided_at=now
        )
        if claimed != 1:
            raise _lost(ApprovalRequest.objects.get(pk=row.pk))
        made = ApprovalDecision.objects.create(
            request=row,
            kind=decision.kind,
            user=user,
            username=user.get_username() if user is not None else "",
            channel=channel,
            fingerprint_seen=decision.fingerprint,
            args=decision.args,
            reason=decision.reason or "",
            text=decision.text or "",
            decided_at=now,
        )
        row.status, row.decision, row.decided_at = Status.DECIDED, decision.kind, now
        _announce(row, "approval.decided", decision=describe(made))
        record_event(
            stream=session_stream(row.session_id),
            type="approval.decided",
            payload={"id": str(row.pk), "decision": decision.kind},
        )
        if row.turn_id is not None:
            # A turn parked on this request goes back on the queue in this transaction.
            wake_turn(row.turn_id)
    return made


def _check_storable(decision: Decision) -> None:
    try:
        for name in ("reason", "text"):
            value = getattr(decision, name)
            if value is not None:
                input_rules.check_text(value, name)
        if decision.args is not None:
            input_rules.check_json(decision.args, "args")
    except RecursionError:
        raise DecisionRefused("args nest too deep", field="args") from None
    except ValueError as error:
        raise DecisionRefused(str(error), field="args" if decision.args else "decision") from None


def _check_edit(row: ApprovalRequest, args: Any) -> None:
    """The edit against the tool itself when its agent still has it, else its schema."""
    tool = _agent_tool(row)
    if tool is not None:
        validate_edit(tool, args)
        return
    from gloveapp.core.tools import Tool

    async def never(args: Any, ctx: Any) -> None:  # pragma: no cover - never run
        return None

    validate_edit(
        Tool(name=row.tool_name, description="", run=never, json_schema=row.input_schema),
        args,
    )


def _agent_tool(row: ApprovalRequest) -> Any:
    from gloveapp.agents.config import get_agent_spec

    try:
        spec = get_agent_spec(row.session.agent_name)
    except Exception:
        return None
    return next((tool for tool in spec.tools if tool.name == row.tool_name), None)


def _lost(row: ApprovalRequest) -> ApprovalConflict:
    if row.status == Status.WITHDRAWN:
        return AlreadyDecided(
            f"request {row.pk} was withdrawn without a decision: its turn ended (stopped, "
            "or failed) before anyone decided, so nothing waits for a decision any more",
            winner=None,
        )
    winner = ApprovalDecision.objects.filter(request_id=row.pk).first()
    described = describe(winner) if winner is not None else None
    by = f" by {winner.username}" if winner is not None and winner.username else ""
    via = f" ({winner.channel})" if winner is not None else ""
    return AlreadyDecided(
        f"request {row.pk} was already decided: {row.decision}{by}{via}", winner=described
    )


def _announce(row: ApprovalRequest, type: str, **extra: Any) -> None:
    record_event(
        stream=approvals_stream(),
        type=type,
        payload={"id": str(row.pk), "status": row.status, "tool": row.tool_name, **extra},
    )


# -- the waiting turn ------------------------------------------------------------------------
def decisions_for_turns(turn_ids: list[int]) -> list[tuple[int, str, dict[str, Any]]]:
    """The decided, not yet delivered requests of these running turns: (turn id, slot id,
    the decision as the executor reads it). Only recorded decisions come out of here."""
    rows = (
        ApprovalDecision.objects.filter(
            request__turn_id__in=turn_ids,
            request__status=Status.DECIDED,
            request__delivered_at__isnull=True,
        )
        .select_related("request")
        .order_by("decided_at")
    )
    return [
        (
            row.request.turn_id,
            row.request.slot_id,
            Decision(
                kind=row.kind,
                fingerprint=row.fingerprint_seen,
                args=row.args,
                reason=row.reason or None,
                text=row.text or None,
                decided_by=row.username or None,
                expired=row.channel == ApprovalDecision.Channel.EXPIRY,
            ).to_dict(),
        )
        for row in rows
    ]


def decided_for_turn(turn_id: int, slot_ids: list[str]) -> bool:
    """Whether a decision on one of these slots of the turn waits to be handed over (the
    turn may not park)."""
    return ApprovalRequest.objects.filter(
        turn_id=turn_id, slot_id__in=slot_ids, status=Status.DECIDED, delivered_at__isnull=True
    ).exists()


def decision_for_slot(*, turn_id: int, slot_id: str) -> dict[str, Any] | None:
    """The decision on the request the turn opened for this slot, as the executor reads it
    (delivered or not: a continuing attempt re-runs the call and takes it again), or None
    while nobody decided."""
    made = (
        ApprovalDecision.objects.filter(
            request__turn_id=turn_id, request__slot_id=slot_id, request__status=Status.DECIDED
        )
        .order_by("-decided_at")
        .first()
    )
    if made is None:
        return None
    return Decision(
        kind=made.kind,
        fingerprint=made.fingerprint_seen,
        args=made.args,
        reason=made.reason or None,
        text=made.text or None,
        decided_by=made.username or None,
    ).to_dict()


def approval_delivered(*, turn_id: int, slot_id: str) -> None:
    """The turn took its decision (its prompt closed): not handed over again."""
    ApprovalRequest.objects.filter(
        turn_id=turn_id, slot_id=slot_id, delivered_at__isnull=True
    ).update(delivered_at=timezone.now())


def approvals_withdraw(*, turn_id: int) -> int:
    """The turn ended (done, stopped, failed) with these requests open: they can no longer
    be decided. Not called when a worker dies or a turn parks: the request stays open and
    the turn's next attempt finds it again. Call inside the turn's transaction."""
    rows = list(
        ApprovalRequest.objects.filter(turn_id=turn_id, status=Status.OPEN).values_list(
            "pk", flat=True
        )
    )
    if not rows:
        return 0
    withdrawn = ApprovalRequest.objects.filter(pk__in=rows, status=Status.OPEN).update(
        status=Status.WITHDRAWN
    )
    for pk in rows:
        record_event(
            stream=approvals_stream(),
            type="approval.withdrawn",
            payload={"id": str(pk), "status": Status.WITHDRAWN},
        )
    return withdrawn


# -- deadlines -------------------------------------------------------------------------------
def expired_reason(row: ApprovalRequest) -> str:
    when = f"{row.expires_at:%-d %b %Y, %H:%M} UTC" if row.expires_at else "the deadline"
    return f"No decision by {when}: the request expired."


def approvals_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Reminders, escalations and expiries that are due at `now`; returns how many of each.

    Run by the turn worker's scheduler every GLOVE_APPROVAL_SWEEP_SECONDS (`tasks`), from any
    number of workers at once: each step is a conditional update on the row, so a reminder
    or escalation happens once, and an expiry is a decision through `approval_decide` (the
    person who decides in the same moment wins, or the expiry does; never both).
    """
    now = now or timezone.now()
    counts = {"reminded": 0, "escalated": 0, "expired": 0}
    due = ApprovalRequest.objects.filter(status=Status.OPEN)
    counts["reminded"] = _once_due(due, "remind_at", "reminded_at", Event.REMINDER, now)
    counts["escalated"] = _once_due(due, "escalate_at", "escalated_at", Event.ESCALATION, now)
    for row in list(due.filter(expires_at__lte=now)):
        kind = row.on_expire
        decision = Decision(
            kind=kind,
            fingerprint=row.fingerprint,
            reason=expired_reason(row) if kind == REJECT else None,
            text=(row.on_expire_text or expired_reason(row)) if kind == RESPOND else None,
        )
        try:
            _expire(row, decision, now)
        except (ApprovalConflict, ApprovalNotFound):
            continue
        except DecisionInvalid:
            # An on_expire the request does not allow: it is rejected instead.
            try:
                reject = Decision(REJECT, row.fingerprint, reason=expired_reason(row))
                _expire(row, reject, now)
            except (ApprovalConflict, ApprovalNotFound, DecisionInvalid):
                continue
        counts["expired"] += 1
    return counts


def _once_due(due: Any, at: str, done: str, event: Any, now: datetime) -> int:
    """The reminders (or escalations) due at `now`, each exactly once: a conditional update
    on its `done` time, so several workers sweeping at once fire it once; how many fired."""
    announced = f"approval.{done.removesuffix('_at')}"  # approval.reminded, .escalated
    fired = 0
    for pk in list(
        due.filter(**{f"{at}__lte": now, f"{done}__isnull": True}).values_list("pk", flat=True)
    ):
        with transaction.atomic():
            if ApprovalRequest.objects.filter(
                pk=pk, status=Status.OPEN, **{f"{done}__isnull": True}
            ).update(**{done: now}):
                row = ApprovalRequest.objects.get(pk=pk)
                _announce(row, announced)
                queue_notifications(row=row, event=event, now=now)
                fired += 1
    return fired


def _expire(row: ApprovalRequest, decision: Decision, now: datetime) -> None:
    with transaction.atomic():
        approval_decide(request_id=row.pk, decision=decision, channel="expiry", now=now)
        row.refresh_from_db()
        queue_notifications(row=row, event=Event.EXPIRY, now=now)


def approvals_prune(*, older_than: timedelta) -> int:
    """Forget requests decided or withdrawn more than `older_than` ago, with their decision
    and notifications (the audit), in bounded batches; returns how many requests. Open
    requests stay whatever their age. The turn worker's scheduler runs it
    (GLOVE_RETAIN_APPROVALS_DAYS)."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    cut = timezone.now() - older_than
    ended = Q(decided_at__lt=cut) | Q(decided_at__isnull=True)
    # created_at bounds the (status, created_at, id) index scan to the candidates.
    return delete_in_batches(
        ApprovalRequest.objects.filter(
            ended,
            status__in=[ApprovalRequest.Status.DECIDED, ApprovalRequest.Status.WITHDRAWN],
            created_at__lt=cut,
        )
    )
