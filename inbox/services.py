"""Every write to the inbox: post, the guarded updates, resolve, consume, expire.

`inbox_item_resolve` is THE resolution: the admin, the signed webhook, the staff API, the
management command, expiry and Python code in any process that shares the database all call
it. It moves an item pending -> resolved in one conditional UPDATE, so of any number of
concurrent resolvers exactly one wins and the others learn it was "already resolved".
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from gloveapp.conversations.locks import session_lock
from gloveapp.conversations.services import check_session_id, lock_session, messages_append
from gloveapp.core import input_rules
from gloveapp.core.approvals.inbox import inbox_allowed, inbox_decision_response
from gloveapp.core.store import (
    DuplicateInboxItem,
    InboxItemNotFound,
    InboxTransitionError,
    check_inbox_transition,
)
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import iso_format
from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.live.eventlog import record_event, record_events
from gloveapp.live.streams import session_stream
from gloveapp.observe import tracing
from inbox.models import InboxItem
from inbox.serialization import inbox_item_fields, inbox_item_to_core

RESOLVERS = tuple(InboxItem.ResolvedBy.values)
Status = InboxItem.Status


def expired_response(expires_at: datetime) -> str:
    return (
        f"Expired: no response arrived by {iso_format(expires_at)}. "
        "Treat this request as unanswered."
    )


def _changed(item: InboxItem) -> tuple[str, dict[str, Any]]:
    return (
        "inbox.changed",
        {"item": inbox_item_to_core(item).to_dict(), "resolved_by": item.resolved_by},
    )


def _announce(item: InboxItem) -> None:
    type, payload = _changed(item)
    record_event(stream=session_stream(item.session_id), type=type, payload=payload)


def _check_resolver(resolved_by: Any, user: Any) -> None:
    if resolved_by not in RESOLVERS:
        raise ValueError(f"resolved_by must be one of {', '.join(RESOLVERS)}, got {resolved_by!r}")
    if user is not None and not getattr(user, "pk", None):
        raise ValueError("user must be a saved user (or None)")


def _not_pending(item_id: str, scope: dict[str, Any], requested: str) -> Exception:
    """Why a conditional update matched no row: unknown id, or no longer pending."""
    current = InboxItem.objects.filter(pk=item_id, **scope).values_list("status", flat=True).first()
    if current is None:
        return InboxItemNotFound(item_id)
    return InboxTransitionError(item_id, current, requested)


def _resolve(
    item_id: str,
    *,
    response: str | None,
    resolved_by: str,
    user: Any = None,
    resolved_at: datetime | None = None,
    scope: dict[str, Any] | None = None,
    decision: str | None = None,
) -> InboxItem:
    """The one pending -> resolved transition every path shares (validated by the caller)."""
    scope = scope or {}
    traced = {
        "glove.inbox.item_id": item_id,
        "glove.wait.channel": resolved_by,
        "glove.wait.decider": getattr(user, "username", "") or "",
        "glove.wait.decision": decision or "",
    }
    with tracing.span_here("glove.inbox.resolve", traced), transaction.atomic():
        # Race: many resolvers may arrive at once. The status in the WHERE clause makes the
        # UPDATE itself the arbiter; the row lock it takes makes the others wait and then
        # match nothing, so exactly one of them sees 1 row.
        claimed = InboxItem.objects.filter(pk=item_id, status=Status.PENDING, **scope).update(
            status=Status.RESOLVED,
            response=response,
            resolved_at=resolved_at or timezone.now(),
            resolved_by=resolved_by,
            resolved_by_user=user,
            decision=decision,
            trace_parent=tracing.current_traceparent(),
        )
        if claimed != 1:
            raise _not_pending(item_id, scope, Status.RESOLVED)
        item = InboxItem.objects.get(pk=item_id)
        _announce(item)
    return item


def inbox_item_resolve(
    *,
    item_id: str,
    response: str | None = None,
    resolved_by: str = "api",
    user: Any = None,
    decision: str | None = None,
    reason: str | None = None,
) -> InboxItem:
    """Resolve a pending item with `response`, or with a `decision`, from any process
    sharing the database.

    Without `decision` it is Glove's text resolution (a respond): the agent reads `response`.
    With one (approve, reject, respond; the item must declare it) the agent reads "Approved."
    or "Rejected." followed by `reason`, or the respond's `response`; the decision is recorded
    with the item (`decision`, beside `resolved_by` and `resolved_by_user`).

    Raises `InboxItemNotFound` for an unknown id, `InboxTransitionError` (its message says
    "already resolved" or "already consumed", `.current_status` tells which) when the item is
    no longer pending, `DecisionRefused` (a ValueError; `.field` names the input) for a
    decision the item does not allow, and ValueError for bad input. Only a successful call
    changes anything.
    """
    input_rules.check_text(item_id, "itemId", allow_empty=False, max_length=input_rules.MAX_ID)
    if decision is None:
        input_rules.check_text(response, "response", allow_empty=False)
    _check_resolver(resolved_by, user)
    # An item's decisions never change once it is posted: read them before the guarded update.
    declared = InboxItem.objects.filter(pk=item_id).values_list("decisions", flat=True)
    found = list(declared[:1])
    if not found:
        raise InboxItemNotFound(item_id)
    kind, text = inbox_decision_response(
        decision, allowed=inbox_allowed(found[0]), response=response, reason=reason
    )
    input_rules.check_text(text, "response" if kind == "respond" else "reason")
    return _resolve(item_id, response=text, resolved_by=resolved_by, user=user, decision=kind)


async def ainbox_item_resolve(
    *,
    item_id: str,
    response: str | None = None,
    resolved_by: str = "api",
    user: Any = None,
    decision: str | None = None,
    reason: str | None = None,
) -> InboxItem:
    return await sync_to_async(inbox_item_resolve)(
        item_id=item_id,
        response=response,
        resolved_by=resolved_by,
        user=user,
        decision=decision,
        reason=reason,
    )


def resolve_inbox_item(
    item_id: str, response: str, *, resolved_by: str = "api", user: Any = None
) -> InboxItem:
    """Deprecated (removed in the next release): `inbox_item_resolve(item_id=..., response=...)`."""
    _deprecated("resolve_inbox_item", "inbox_item_resolve")
    return inbox_item_resolve(
        item_id=item_id, response=response, resolved_by=resolved_by, user=user
    )


async def aresolve_inbox_item(
    item_id: str, response: str, *, resolved_by: str = "api", user: Any = None
) -> InboxItem:
    """Deprecated (removed in the next release): `ainbox_item_resolve(item_id=..., response=...)`."""
    _deprecated("aresolve_inbox_item", "ainbox_item_resolve")
    return await ainbox_item_resolve(
        item_id=item_id, response=response, resolved_by=resolved_by, user=user
    )


def _deprecated(old: str, new: str) -> None:
    # stacklevel 3: the warning names the caller of the old name, not this module.
    warnings.warn(
        f"inbox.services.{old}(item_id, response, ...) is deprecated and goes in the next "
        f"release; call {new}(item_id=..., response=...).",
        DeprecationWarning,
        stacklevel=3,
    )


def inbox_item_add(
    *,
    session_id: str,
    item: CoreInboxItem,
    expires_at: datetime | None = None,
    resolved_by: str | None = None,
) -> InboxItem:
    """Store a new item (any status: glove-mesh adds inbound messages already resolved).

    `item.id` becomes the row's `key`, unique within the session (`DuplicateInboxItem`
    otherwise). It is the row's global `id` too, unless another session's item already has
    that id: then the row gets a fresh one, and nothing on the session's side tells.
    """
    check_session_id(session_id)
    fields = inbox_item_fields(item)
    if expires_at is not None:
        expires_at = input_rules.check_timestamp(expires_at, "expires_at")
    if resolved_by is not None:
        _check_resolver(resolved_by, None)
    if fields["status"] == Status.PENDING:
        resolved_by = None
    key = fields["key"]
    with transaction.atomic():
        lock_session(session_id)  # serialises the adds of one session
        # One read for both questions: is the key the session's already (a duplicate), and
        # is it some other session's item id (then this item gets a fresh one, silently).
        holders = list(
            InboxItem.objects.filter(Q(pk=key) | Q(session_id=session_id, key=key)).values_list(
                "session_id", "key"
            )
        )
        if (session_id, key) in holders:
            raise DuplicateInboxItem(key)
        values = {
            "session_id": session_id,
            "expires_at": expires_at,
            "resolved_by": resolved_by,
            "consumed_at": timezone.now() if fields["status"] == Status.CONSUMED else None,
            # An item added already resolved (a mesh message): the turn that consumes it
            # links to the span that sent it, when one is current here.
            "trace_parent": tracing.current_traceparent() if resolved_by else "",
            **fields,
        }
        row = _create_item(key if not holders else _fresh_item_id(), values)
        _announce(row)
    return row


def _fresh_item_id() -> str:
    return f"inbox_{uuid.uuid4().hex}"


def _create_item(item_id: str, values: dict[str, Any]) -> InboxItem:
    try:
        with transaction.atomic():  # savepoint: a concurrent add of the same id may win
            return InboxItem.objects.create(id=item_id, **values)
    except IntegrityError:
        # The session is locked, so its own keys cannot race: another session's item
        # took this id in that moment. The same answer, under a fresh id.
        with transaction.atomic():
            return InboxItem.objects.create(id=_fresh_item_id(), **values)


def inbox_items_deliver(*, session_id: str, items: list[CoreInboxItem]) -> list[InboxItem]:
    """Store several resolved items that arrived for one session (mesh deliveries), in one
    insert with one batch of `inbox.changed` events, inside the caller's transaction.

    For items whose ids were just made up by the caller (`new_mesh_item_id`): a colliding id
    fails the whole batch (an IntegrityError) instead of being checked one by one.
    """
    check_session_id(session_id)
    rows = []
    sent_in = tracing.current_traceparent()  # the mesh send's span, when it is traced here
    for item in items:
        fields = inbox_item_fields(item)
        rows.append(
            InboxItem(
                id=fields["key"],
                session_id=session_id,
                resolved_by="mesh",
                trace_parent=sent_in,
                **fields,
            )
        )
    with transaction.atomic(savepoint=False):
        lock_session(session_id)
        InboxItem.objects.bulk_create(rows)
        record_events(
            stream=session_stream(session_id),
            events=[_changed(row) for row in rows],
        )
    return rows


class InboxUpdateRefused(Exception):
    """The caller may not make this change (it is no one's ValueError: the input is fine)."""


# Where a customer's answers come from (the refusals name it).
RESOLUTION_ELSEWHERE = (
    "resolving an inbox item (or writing its response or resolved_at) belongs to staff: "
    "POST /api/inbox/resolve, the admin, or a signed webhook"
)


def inbox_item_update(
    *,
    session_id: str,
    item_id: str,
    updates: dict[str, Any],
    resolved_by: str = "agent",
    user: Any = None,
    may_resolve: bool = True,
) -> InboxItem:
    """Apply `status`/`response`/`resolved_at` to one item of the session, guarded.

    Only pending -> resolved, resolved -> consumed and pending -> consumed (a withdrawn
    request) are allowed, and `response`/`resolved_at` are written only as the item leaves
    pending: an answer is never rewritten, and a pending item never gets one without being
    resolved. With `may_resolve=False` (a session's owner over REST) the only update is
    `{"status": "consumed"}` (taking a resolved item, or withdrawing a pending one without
    answering it); any other allowed transition raises `InboxUpdateRefused`. Raises
    `InboxItemNotFound` (also for another session's item), `InboxTransitionError`, or
    ValueError for bad fields.
    """
    check_session_id(session_id)
    input_rules.check_text(item_id, "item_id", allow_empty=False)
    if not isinstance(updates, dict):
        raise ValueError("updates must be an object")
    _check_resolver(resolved_by, user)
    requested = updates.get("status")
    answer = sorted({"response", "resolved_at"} & set(updates))
    response = updates.get("response")
    if response is not None:
        input_rules.check_text(response, "response")
    resolved_at = None
    if updates.get("resolved_at") is not None:
        resolved_at = input_rules.check_timestamp(updates["resolved_at"], "resolved_at")

    with transaction.atomic():
        # Race: a resolution may commit at any moment. The row lock makes it wait for this
        # transaction (SQLite's IMMEDIATE transaction does the same for the whole file), the
        # transition is checked against the locked row, and the UPDATE is conditional on the
        # status read, so nothing is decided on a stale copy.
        row = (
            InboxItem.objects.select_for_update().filter(session_id=session_id, key=item_id).first()
        )
        if row is None:
            raise InboxItemNotFound(item_id)
        # From here on the row by its global id (what `_resolve` shares with the resolvers);
        # what the caller reads still names it by `item_id`, its key.
        scope = {"session_id": session_id}
        check_inbox_transition(inbox_item_to_core(row), updates)
        if not may_resolve and (requested != Status.CONSUMED or answer):
            # After the transition check: what nobody may do is a 409 whoever asks.
            refused = f"a {' and '.join(answer)} change" if answer else f"status {requested!r}"
            raise InboxUpdateRefused(
                f"refused: {refused} on {item_id}; a session's owner may only mark an item "
                f"consumed, without response or resolved_at ({RESOLUTION_ELSEWHERE})"
            )
        leaves_pending = row.status == Status.PENDING and requested is not None
        if answer and not leaves_pending:
            raise ValueError(
                f"{', '.join(answer)} can only be set as an item leaves pending "
                f"(resolved, or consumed when withdrawn); {item_id} is {row.status}"
            )
        if requested is None:
            return row  # nothing to write
        if requested == Status.RESOLVED:
            try:
                return _resolve(
                    row.pk,
                    response=updates.get("response", row.response),
                    resolved_by=resolved_by,
                    user=user,
                    resolved_at=resolved_at,
                    scope=scope,
                )
            except (InboxItemNotFound, InboxTransitionError) as exc:
                raise _named(exc, item_id) from None
        changes: dict[str, Any] = {"status": Status.CONSUMED, "consumed_at": timezone.now()}
        if "response" in updates:
            changes["response"] = response
        if "resolved_at" in updates:
            changes["resolved_at"] = resolved_at
        claimed = InboxItem.objects.filter(pk=row.pk, status=row.status, **scope).update(**changes)
        if claimed != 1:
            raise _named(_not_pending(row.pk, scope, requested), item_id)
        row = InboxItem.objects.get(pk=row.pk)
        _announce(row)
    return row


def _named(exc: Exception, item_id: str) -> Exception:
    """A refusal about a row, told by the name (`key`) the session's side knows it by."""
    if isinstance(exc, InboxTransitionError):
        return InboxTransitionError(item_id, exc.current_status, exc.requested_status)
    if isinstance(exc, InboxItemNotFound):
        return InboxItemNotFound(item_id)
    return exc


def inbox_items_consume_resolved(*, session_id: str) -> list[CoreInboxItem]:
    """Return the session's resolved items and mark them consumed, in one transaction.

    Two concurrent turns on one session each get a disjoint set: the rows are locked, and a
    second turn's SELECT ... FOR UPDATE waits, then re-checks `status` and finds them gone.
    The returned items still say "resolved" (what they were when taken), as MemoryStore does.
    """
    check_session_id(session_id)
    if not _has_resolved(session_id):
        return []
    with transaction.atomic():
        return _take_resolved(session_id)


def inbox_items_inject_resolved(
    *, session_id: str, build_message: Callable[[list[CoreInboxItem]], CoreMessage]
) -> CoreMessage | None:
    """Consume the resolved items and append the message announcing them, atomically.

    The agent loop's injection step: a crash between taking the items and writing their
    banner would otherwise lose them (consumed, never shown) or, retried, show them twice.
    """
    check_session_id(session_id)
    if not _has_resolved(session_id):
        return None
    with transaction.atomic():
        # The session's row before its stream's lock (the items' events), as every append.
        session_lock(session_id)
        taken = _take_resolved(session_id)
        if not taken:
            return None
        message = build_message(taken)
        messages_append(session_id=session_id, messages=[message])
    return message


def _has_resolved(session_id: str) -> bool:
    # Every turn asks, and usually nothing is resolved: answer that with a plain read instead
    # of a write transaction (which on SQLite takes the database's write lock). An item
    # resolved just after this read is taken by the next turn, as Glove does.
    # Raw SQL: asked by every turn, and the ORM's query building cost more than the probe.
    with connection.cursor() as cursor:
        cursor.execute(_HAS_RESOLVED_SQL, [session_id, Status.RESOLVED.value])
        return cursor.fetchone() is not None


_HAS_RESOLVED_SQL = (
    f'SELECT 1 FROM "{InboxItem._meta.db_table}" WHERE "session_id" = %s AND "status" = %s LIMIT 1'
)


def _take_resolved(session_id: str) -> list[CoreInboxItem]:
    """Lock, mark consumed and return the resolved items; call inside a transaction."""
    rows = list(
        InboxItem.objects.select_for_update()
        .filter(session_id=session_id, status=Status.RESOLVED)
        .order_by("created_at", "key")
    )
    if not rows:
        return []
    taken = [inbox_item_to_core(row) for row in rows]
    now = timezone.now()
    InboxItem.objects.filter(pk__in=[row.pk for row in rows], status=Status.RESOLVED).update(
        status=Status.CONSUMED, consumed_at=now
    )
    for row in rows:
        row.status, row.consumed_at = Status.CONSUMED, now
        _announce(row)
        _trace_wait(row)
    return taken


def _trace_wait(row: InboxItem) -> None:
    """The consuming turn's `glove.wait inbox` span: the item's wait from its post to its
    resolution, linked to the resolution's span (another process's, often)."""
    if not tracing.recording():
        return
    resolved_at = row.resolved_at or row.created_at
    tracing.span_between(
        "glove.wait inbox",
        start_ns=_ns(row.created_at),
        end_ns=max(_ns(resolved_at), _ns(row.created_at)),
        attributes={
            "glove.wait.kind": "inbox",
            "glove.wait.outcome": "resolved",
            "glove.wait.seconds": max((resolved_at - row.created_at).total_seconds(), 0.0),
            "glove.wait.channel": row.resolved_by or "",
            "glove.wait.decider": _resolver_name(row),
            "glove.wait.decision": row.decision or "",
            "glove.inbox.item_id": row.pk,
            "glove.inbox.tag": row.tag,
        },
        links=(row.trace_parent,),
    )


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def _resolver_name(row: InboxItem) -> str:
    if row.resolved_by_user_id is None:
        return ""
    return row.resolved_by_user.username if row.resolved_by_user else ""


def expire_inbox_items(*, now: datetime | None = None) -> int:
    """Resolve every pending item whose `expires_at` has passed; returns how many.

    Each goes through the same conditional resolve, one transaction per item, so an item
    someone resolves at the same moment is simply skipped, never overwritten.
    """
    now = now or timezone.now()
    due = InboxItem.objects.filter(status=Status.PENDING, expires_at__lte=now).values_list(
        "pk", "expires_at"
    )
    expired = 0
    for item_id, expires_at in list(due):
        try:
            _resolve(item_id, response=expired_response(expires_at), resolved_by="expiry")
        except (InboxItemNotFound, InboxTransitionError):
            continue
        expired += 1
    return expired


def inbox_items_prune(*, older_than: timedelta) -> int:
    """Forget items their agent consumed more than `older_than` ago, in bounded batches;
    returns how many. Pending and resolved items stay whatever their age: an agent has not
    read them yet. The turn worker's scheduler runs it (GLOVE_RETAIN_INBOX_CONSUMED_DAYS)."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    cut = timezone.now() - older_than
    # created_at too (an item is consumed after it is created): the (status, created_at)
    # index then reads only the candidates, not every consumed item kept.
    return delete_in_batches(
        InboxItem.objects.filter(
            status=InboxItem.Status.CONSUMED, created_at__lt=cut, consumed_at__lt=cut
        )
    )
