"""Every change to turns and their prompts: one function each, in a transaction.

The claim is the heart: a queued turn becomes `running` in one conditional UPDATE, and the
partial unique index `one_running_turn_per_session` refuses a second running turn of the
same session, so two workers (or two processes) racing for a session cannot both win.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from gloveapp import db
from gloveapp.agents.labels import call_summary, tool_label
from gloveapp.approvals import services as approvals
from gloveapp.conversations.append import Fence, fence_holds
from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.services import messages_append
from gloveapp.core import input_rules
from gloveapp.core.agent import TOOL_RESULTS_TEXT
from gloveapp.core.approvals import APPROVAL_RENDERER, permission_decision
from gloveapp.core.display import PERMISSION_RENDERER
from gloveapp.core.executor import ABORTED_MESSAGE, PERMISSION_DENY_ONCE, PERMISSION_ONCE
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import ToolResult, ToolResultData
from gloveapp.db import delete_in_batches, prepared_cursor, sql_datetime
from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import session_stream
from gloveapp.observe import tracing
from gloveapp.observe.cost import Usage
from gloveapp.turns.models import SessionUsage, Turn, TurnSlot, TurnStep
from gloveapp.wake import TURNS as WAKE_TURNS
from gloveapp.wake import wake_after_commit

# The permission vocabulary, in one place: what a prompt offers (value, button label), what
# each answer tells the executor, and how a remembered decision is named on the page.
# "once" and "deny_once" are not remembered; "always" and "always_deny" are stored for the
# chat (and shown, with a reset, beside it). "deny" and the booleans are Glove's answers:
# a denial Glove stores, so a plain "deny" keeps meaning "always deny" for API callers.
PERMISSION_CHOICES: tuple[tuple[str, str], ...] = (
    ("once", "Allow once"),
    ("always", "Always allow"),
    ("deny_once", "Deny once"),
    ("always_deny", "Always deny"),
)
PERMISSION_ANSWERS: dict[Any, Any] = {
    "once": PERMISSION_ONCE,
    "always": True,
    "allow": True,
    "deny_once": PERMISSION_DENY_ONCE,
    # The approvals vocabulary (gloveapp.core.approvals): approve = once, reject = deny once
    # (`{"decision": "reject", "reason": ...}` carries a reason the agent reads).
    "approve": PERMISSION_ONCE,
    "reject": PERMISSION_DENY_ONCE,
    "always_deny": False,
    "deny": False,
    True: True,
    False: False,
}
# The words a permission prompt takes as its answer (the REST route's choices).
PERMISSION_ANSWER_WORDS: tuple[str, ...] = tuple(
    answer for answer in PERMISSION_ANSWERS if isinstance(answer, str)
)
REMEMBERED_PERMISSION_LABELS = {"granted": "Always allowed", "denied": "Always denied"}
LIVE_STATUSES = (Turn.Status.QUEUED, Turn.Status.RUNNING, Turn.Status.WAITING)
# What a slot's answer may land on: a turn running, parked on a person, or back on the queue
# (answered meanwhile, or taken back from a dead worker): its next attempt finds the answer.
ANSWERABLE_STATUSES = LIVE_STATUSES
# `Turn.source` of a mesh peer's wake-up.
MESH_SOURCE = "mesh"
# PostgreSQL NOTIFY channel (`gloveapp.db`): "<turn id>" when a prompt of that turn is
# answered, an approval decided or a stop asked for; the worker running it LISTENs
# (`TurnEngine`), and polls only as a safety net.
TURNS_CHANNEL = db.TURNS_CHANNEL
# ... and this payload when a task was enqueued on the database queue: idle workers take it
# at once instead of polling the task table every few milliseconds.
TASK_ENQUEUED = "task"


class QueueFull(Exception):
    """Too many messages are already waiting behind this session's running turn."""


class TurnLimitReached(Exception):
    """The user started as many turns as GLOVE_TURNS_PER_USER_PER_MINUTE allows."""


def _event(turn: Turn, type: str, payload: dict[str, Any]) -> int:
    """Record the event on the turn's session stream; returns its id."""
    return record_event(stream=session_stream(turn.session_id), type=type, payload=payload).pk


def turn_submit(*, session_id: str, text: str, user_id: int | None, source: str = "page") -> Turn:
    """Queue `text` as the session's next turn; the caller enqueues the task after commit.

    Raises `QueueFull` past GLOVE_MAX_QUEUED_MESSAGES waiting messages, and
    `TurnLimitReached` past the user's turns per minute: every turn is a paid model call.
    """
    with transaction.atomic():
        # The bound is a count read before the insert: without a lock, concurrent posts
        # all read the same count and all insert (20 of 20 did, with a bound of 5). The
        # session's row lock makes count-then-insert one decision per session on
        # PostgreSQL; SQLite's transactions begin IMMEDIATE, so its writers are serial.
        list(Session.objects.select_for_update().filter(pk=session_id).values_list("pk"))
        since = timezone.now() - timedelta(minutes=1)
        if user_id is not None:
            recent = Turn.objects.filter(user_id=user_id, created_at__gte=since).count()
            if recent >= settings.GLOVE_TURNS_PER_USER_PER_MINUTE:
                raise TurnLimitReached(
                    f"You have started {recent} turns in the last minute, the most allowed; "
                    "wait a moment before sending another message."
                )
        elif source == MESH_SOURCE:
            # A mesh peer nobody owns is limited as a user of its own: other agents wake it,
            # and every wake-up is a paid model call.
            # The newest turns only, through (session, id): a peer's session holds every
            # wake-up it ever had, and this runs on each one.
            bound = settings.GLOVE_MESH_TURNS_PER_MINUTE
            newest = (
                Turn.objects.filter(session_id=session_id)
                .order_by("-id")
                .values_list("created_at", flat=True)[:bound]
            )
            recent = sum(1 for created_at in newest if created_at >= since)
            if recent >= bound:
                raise TurnLimitReached(
                    f"Mesh agent {session_id} started {recent} turns in the last minute, "
                    "the most GLOVE_MESH_TURNS_PER_MINUTE allows."
                )
        live = Turn.objects.filter(session_id=session_id, status__in=LIVE_STATUSES).aggregate(
            waiting=Count("pk", filter=Q(status=Turn.Status.QUEUED)),
            running=Count("pk", filter=~Q(status=Turn.Status.QUEUED)),
        )
        waiting = live["waiting"]
        # A turn parked on a person (`waiting`) counts as the running one: this queues behind it.
        if waiting >= settings.GLOVE_MAX_QUEUED_MESSAGES:
            raise QueueFull(
                f"{waiting} messages are already waiting for this chat; "
                "wait for the agent to answer."
            )
        turn = Turn.objects.create(
            session_id=session_id,
            text=text,
            user_id=user_id,
            source=source,
            trace_parent=tracing.current_traceparent(),
        )
        # How many turns run or wait before this one (as this transaction saw them).
        turn.ahead = waiting + live["running"]
        # Every page of the chat lists what waits (a second tab, after a reload). Its id is
        # where a client that follows the turn starts its stream (the REST start's answer).
        turn.queued_event = _event(turn, "turn.queued", {"turn": turn.pk})
        return turn


def turn_withdraw(*, session_id: str, turn_id: int, user_id: int | None = None) -> bool:
    """Take a queued message back before it runs; False when it is no longer queued (it
    started, finished, or was withdrawn already)."""
    with transaction.atomic():
        now = timezone.now()
        # Conditional: a worker claiming it at the same moment wins or loses in one row.
        withdrawn = Turn.objects.filter(
            pk=turn_id, session_id=session_id, status=Turn.Status.QUEUED
        ).update(
            status=Turn.Status.CANCELLED,
            error="withdrawn",
            stopped_by_id=user_id,
            stopped_at=now,
            finished_at=now,
        )
        if withdrawn:
            _event(Turn(id=turn_id, session_id=session_id), "turn.withdrawn", {"turn": turn_id})
        return bool(withdrawn)


def turn_wake(*, session_id: str, text: str, user_id: int | None) -> Turn | None:
    """Queue a mesh peer's wake-up turn, unless one is already queued: a queued turn reads
    the whole inbox when it starts, so it takes this arrival too. None when coalesced.

    Limits as `turn_submit`; a refused wake-up leaves the message in the inbox, where the
    next turn of the peer finds it.
    """
    with transaction.atomic():
        if Turn.objects.filter(session_id=session_id, status=Turn.Status.QUEUED).exists():
            return None
        return turn_submit(session_id=session_id, text=text, user_id=user_id, source=MESH_SOURCE)


_TURN = Turn._meta.db_table
_SESSION = Session._meta.db_table
# Claimed in one statement: the session's running or parked turn if it has one ("running"
# and "waiting" sort after "queued"), else its oldest queued one, becomes this worker's if it
# is queued: a turn parked on a person holds the session as a running one does. The base seq
# (the session's last message before the turn stored anything) is kept from the first
# attempt: a retry compares against it.
_CLAIM_SQL = f"""
    WITH next AS (
        SELECT id, status FROM {_TURN}
         WHERE session_id = %s AND status IN ('queued', 'running', 'waiting')
         ORDER BY status DESC, id LIMIT 1
    )
    UPDATE {_TURN}
       SET status = 'running', worker_id = %s, lease_until = %s,
           attempts = attempts + 1, started_at = %s,
           base_seq = COALESCE(base_seq, (SELECT last_seq FROM {_SESSION} WHERE id = %s))
     WHERE id = (SELECT id FROM next WHERE status = 'queued') AND status = 'queued'
    RETURNING id, text, source, user_id, attempts, base_seq, created_at, resumes,
              cancel_requested, trace_parent, restarting
"""


def turn_claim_next(*, session_id: str, worker_id: str) -> Turn | None:
    """Claim the session's oldest queued turn for `worker_id`, or None (running elsewhere,
    nothing queued, or another worker won the race).

    Raw SQL, prepared on PostgreSQL: the ORM's three queries for this cost more than a
    turn's every other bookkeeping (profiled, issue 12)."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.GLOVE_TURN_LEASE_SECONDS)
    try:
        # One statement, outside any transaction: the conditional status and the unique
        # index decide the race between workers, whichever reaches the row first.
        with prepared_cursor() as cursor:
            cursor.execute(
                _CLAIM_SQL,
                [session_id, worker_id, sql_datetime(lease), sql_datetime(now), session_id],
            )
            row = cursor.fetchone()
    except IntegrityError:
        # The unique index: another worker started a turn of this session meanwhile.
        return None
    if row is None:
        return None
    turn_id, text, source, user_id, attempts, base_seq, created_at, resumes, cancel = row[:9]
    trace_parent, restarting = row[9], row[10]
    turn = Turn(
        id=turn_id,
        session_id=session_id,
        text=text,
        source=source,
        user_id=user_id,
        status=Turn.Status.RUNNING,
        attempts=attempts,
        resumes=resumes,
        cancel_requested=bool(cancel),
        worker_id=worker_id,
        lease_until=lease,
        base_seq=base_seq,
        created_at=created_at,
        started_at=now,
        trace_parent=trace_parent or "",
        restarting=bool(restarting),
    )
    turn._state.adding = False
    # The worker of the attempt before a retry (its timeline step says; "" when none).
    turn.previous_worker = previous_attempt_worker(turn) if turn.retried else ""
    with transaction.atomic():
        _event(
            turn,
            "turn.restarted" if turn.retried else "turn.started",
            {"turn": turn.pk, "text": turn.text, "attempt": turn.attempts, "resumes": resumes},
        )
        if settings.GLOVE_TIMELINE_MAX_STEPS > 0:
            # The attempt's timeline step, with the claim: a worker that dies mid-turn still
            # leaves who ran the attempt (its duration stays empty), at no cost of its own.
            detail = {"previous_worker": turn.previous_worker} if turn.retried else None
            step = StepData(TurnStep.Kind.ATTEMPT, f"attempt {attempts}", now, detail=detail)
            _insert_steps(turn.pk, attempts, worker_id, [step])
    return turn


_FENCE_SQL = (
    f"EXISTS (SELECT 1 FROM {_TURN} WHERE id = %s AND status = 'running' AND worker_id = %s "
    "AND attempts = %s{lock})"
)


def turn_fence(turn: Turn) -> Fence:
    """The condition every write of this attempt of the turn is made on: the turn is still
    running, by this worker, in this attempt. A worker frozen past its lease (or cut off
    from the database) whose turn another worker took back then stores nothing more: its
    reply, tool results and prompts are refused (`FencedOff`) and the turn stops.

    On PostgreSQL the write's statement share-locks the turn row, so a take-back waits for
    the write to commit (and a write waits for a take-back, then sees it): the retry reads
    the conversation with every write of the earlier attempt in it, or none."""
    lock = " FOR SHARE" if transaction.get_connection().vendor == "postgresql" else ""
    return Fence(
        condition=_FENCE_SQL.replace("{lock}", lock),
        params=(turn.pk, turn.worker_id, turn.attempts),
    )


def turn_holds(turn: Turn) -> bool:
    """Whether this attempt of the turn is still its worker's (in the caller's transaction,
    share-locked on PostgreSQL: see `turn_fence`)."""
    return fence_holds(turn_fence(turn))


def turn_release(*, turn: Turn, worker_id: str) -> bool:
    """Put a running turn back on the queue: its worker lost the database in the middle of
    it. What the turn stored stays (its retry resumes from there), its prompts and requests
    too (the retry finds them again). False when this worker no longer holds it."""
    # Conditional: another worker's sweep may have taken it back already.
    released = Turn.objects.filter(
        pk=turn.pk, status=Turn.Status.RUNNING, worker_id=worker_id
    ).update(status=Turn.Status.QUEUED, worker_id="", lease_until=None, restarting=False)
    return bool(released)


def turn_stored_reply(turn: Turn) -> str | None:
    """The reply an earlier attempt of the turn already stored (it ended before it could
    say the turn was done), or None: a retry must not answer twice."""
    last = (
        Message.objects.filter(
            session_id=turn.session_id,
            seq__gt=turn.base_seq or 0,
            is_compaction=False,
            framework_context__isnull=True,
        )
        .order_by("-seq")
        .values_list("sender", "text", "tool_calls")
        .first()
    )
    if last is None:
        return None
    sender, text, tool_calls = last
    return text if sender == "agent" and not tool_calls else None


def turn_request_stored(turn: Turn) -> bool:
    """Whether an earlier attempt already stored the turn's request (resume, not re-ask)."""
    return Message.objects.filter(
        session_id=turn.session_id, seq__gt=turn.base_seq or 0, sender="user", text=turn.text
    ).exists()


_FINISH_SQL = f"""
    UPDATE {_TURN} SET status = %s, error = %s, finished_at = %s, lease_until = NULL,
           model = %s, tokens_in = tokens_in + %s, tokens_out = tokens_out + %s,
           cache_read_tokens = cache_read_tokens + %s,
           cache_write_tokens = cache_write_tokens + %s
     WHERE id = %s AND status = 'running' AND worker_id = %s
    RETURNING session_id
"""


_USAGE = SessionUsage._meta.db_table
# The session's usage per model gains the finished turn's (once: the UPDATE above is fenced).
_USAGE_SQL = f"""
    INSERT INTO {_USAGE} (session_id, model, tokens_in, tokens_out, cache_read_tokens,
                          cache_write_tokens)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (session_id, model) DO UPDATE SET
        tokens_in = {_USAGE}.tokens_in + excluded.tokens_in,
        tokens_out = {_USAGE}.tokens_out + excluded.tokens_out,
        cache_read_tokens = {_USAGE}.cache_read_tokens + excluded.cache_read_tokens,
        cache_write_tokens = {_USAGE}.cache_write_tokens + excluded.cache_write_tokens
"""


def _add_session_usage(session_id: str, model: str, usage: Usage) -> None:
    """Add an attempt's tokens to the session's row for its model (the session's cost reads
    those rows, not its turns), in the caller's transaction."""
    if not (usage.tokens_in or usage.tokens_out or usage.cache_read or usage.cache_write):
        return
    with prepared_cursor() as cursor:
        cursor.execute(
            _USAGE_SQL,
            [
                session_id,
                model[: Turn._meta.get_field("model").max_length],
                usage.tokens_in,
                usage.tokens_out,
                usage.cache_read,
                usage.cache_write,
            ],
        )


def turn_finish(
    *,
    turn_id: int,
    worker_id: str,
    status: str,
    error: str = "",
    reply: str = "",
    prompted: bool = True,
    model: str = "",
    usage: Usage | None = None,
    steps: list[StepData] | None = None,
    attempt: int = 1,
    started_at: Any = None,
) -> bool:
    """End a running turn; False when this worker no longer holds it (taken back).

    `prompted=False` (the turn pushed no prompt) skips looking for prompts to expire.
    `model` and `usage`: the model the attempt talked to and the tokens it used (its cost),
    added to those of the attempts before it that parked (`turn_park`);
    `steps`: its timeline steps not stored yet (of attempt `attempt`, claimed at
    `started_at`), stored with the end (the same fence)."""
    usage = usage or Usage()
    with transaction.atomic():
        with prepared_cursor() as cursor:
            cursor.execute(
                _FINISH_SQL,
                [
                    status,
                    error,
                    sql_datetime(timezone.now()),
                    model[: Turn._meta.get_field("model").max_length],
                    usage.tokens_in,
                    usage.tokens_out,
                    usage.cache_read,
                    usage.cache_write,
                    turn_id,
                    worker_id,
                ],
            )
            row = cursor.fetchone()
        if row is None:
            return False
        turn = Turn(id=turn_id, session_id=row[0])
        _add_session_usage(row[0], model, usage)
        _close_attempt_step(turn_id, attempt, worker_id, started_at=started_at, outcome=status)
        if steps:
            _insert_steps(turn_id, attempt, worker_id, steps)
        if prompted:
            _expire_slots(turn)
        if status in (Turn.Status.CANCELLED, Turn.Status.FAILED):
            _close_open_calls(turn_id, status=status, error=error)
        if status == Turn.Status.DONE:
            _event(turn, "turn.finished", {"turn": turn_id, "text": reply})
        elif status == Turn.Status.CANCELLED:
            _event(turn, "turn.error", {"turn": turn_id, "message": "The turn was stopped."})
        else:
            _event(turn, "turn.error", {"turn": turn_id, "message": error})
    return True


def turn_note(*, turn_id: int, worker_id: str, text: str) -> bool:
    """Add `text` to what the page says about a running turn; False when this worker no
    longer holds it."""
    with transaction.atomic():
        turn = (
            Turn.objects.select_for_update()
            .filter(pk=turn_id, status=Turn.Status.RUNNING, worker_id=worker_id)
            .first()
        )
        if turn is None:
            return False
        lines = [line for line in turn.notice.splitlines() if line]
        if text in lines:
            return True
        turn.notice = "\n".join([*lines, text])
        turn.save(update_fields=["notice"])
        _event(turn, "turn.notice", {"turn": turn_id, "notice": text})
    return True


def turns_heartbeat(*, turn_ids: list[int], worker_id: str) -> set[int]:
    """Renew the leases of this worker's running turns; returns the ids it still holds."""
    lease = timezone.now() + timedelta(seconds=settings.GLOVE_TURN_LEASE_SECONDS)
    held = Turn.objects.filter(pk__in=turn_ids, status=Turn.Status.RUNNING, worker_id=worker_id)
    held.update(lease_until=lease)
    return set(held.values_list("pk", flat=True))


def turns_take_back(*, now: Any = None) -> list[str]:
    """Requeue running turns whose worker stopped renewing the lease (or fail them after
    GLOVE_TURN_MAX_ATTEMPTS); returns the sessions that have a turn to run again."""
    now = now or timezone.now()
    sessions: list[str] = []
    stale = Turn.objects.filter(status=Turn.Status.RUNNING, lease_until__lt=now)
    for turn in stale:
        with transaction.atomic():
            # Continuations after a wait on a person are no restarts: they do not count.
            gave_up = turn.attempts - turn.resumes >= settings.GLOVE_TURN_MAX_ATTEMPTS
            status = Turn.Status.FAILED if gave_up else Turn.Status.QUEUED
            # Conditional on the lease still being the stale one: its worker may have
            # renewed it a moment ago (alive after all), or another sweeper got here first.
            taken = Turn.objects.filter(
                pk=turn.pk, status=Turn.Status.RUNNING, lease_until=turn.lease_until
            ).update(
                status=status,
                worker_id="",
                lease_until=None,
                restarting=True,
                error="The worker running this turn stopped." if gave_up else "",
                finished_at=now if gave_up else None,
            )
            if taken != 1:
                continue
            # A worker's death is not a stop: what the turn waits on (a prompt, a request
            # with its e-mails sent) stays open, and the retry finds it again by slot id.
            if gave_up:
                _expire_slots(turn)
                _close_open_calls(turn.pk, status=Turn.Status.FAILED, error=turn_failed_text())
                _event(turn, "turn.error", {"turn": turn.pk, "message": turn_failed_text()})
        sessions.append(turn.session_id)
    return sessions


def turn_failed_text() -> str:
    return "The server running this turn stopped several times; send the message again."


def sessions_waiting(*, older_than: timedelta) -> list[str]:
    """Sessions with a queued turn nobody started: their task was lost (a worker died
    between taking the task and claiming the turn, a flushed queue)."""
    cutoff = timezone.now() - older_than
    busy = Turn.objects.filter(status__in=[Turn.Status.RUNNING, Turn.Status.WAITING]).values(
        "session_id"
    )
    return list(
        Turn.objects.filter(status=Turn.Status.QUEUED, created_at__lt=cutoff)
        .exclude(session_id__in=busy)
        .values_list("session_id", flat=True)
        .distinct()
    )


def _close_open_calls(turn_id: int, *, status: str, error: str) -> None:
    """A stopped or failed turn leaves no tool call without a result (Glove leaves them
    open, contract §10 BUG 10): each open call of the turn gets an `aborted` (stopped) or
    `error` (failed) result, stored, so every reader (the page, the admin, the REST store,
    the model on the next turn) sees how it ended. `data` says who stopped it and when."""
    turn = (
        Turn.objects.select_related("stopped_by")
        .only("session_id", "base_seq", "stopped_at", "stopped_by__username")
        .get(pk=turn_id)
    )
    rows = Message.objects.filter(session_id=turn.session_id, seq__gt=turn.base_seq or 0)
    calls: dict[str, str] = {}
    for tool_calls, tool_results in rows.order_by("seq").values_list("tool_calls", "tool_results"):
        for call in tool_calls or []:
            if isinstance(call, dict) and call.get("id"):
                calls[call["id"]] = str(call.get("tool_name") or "")
        for result in tool_results or []:
            if isinstance(result, dict):
                calls.pop(result.get("call_id") or "", None)
    if status == Turn.Status.CANCELLED:
        stopped_by = turn.stopped_by.get_username() if turn.stopped_by else None
        stopped_at = (turn.stopped_at or timezone.now()).isoformat()
        outcome = ToolResultData(
            status="aborted",
            message=ABORTED_MESSAGE,
            data={"stoppedBy": stopped_by, "stoppedAt": stopped_at},
        )
    else:
        outcome = ToolResultData(status="error", message=f"The turn failed: {error}")
    if calls:
        results = [
            ToolResult(tool_name=name, call_id=call_id, result=outcome)
            for call_id, name in calls.items()
        ]
        messages_append(
            session_id=turn.session_id,
            messages=[CoreMessage(sender="user", text=TOOL_RESULTS_TEXT, tool_results=results)],
        )
    last_seq = Session.objects.filter(pk=turn.session_id).values_list("last_seq", flat=True)
    Turn.objects.filter(pk=turn_id).update(end_seq=last_seq.first())


def turn_cancel(*, session_id: str, user_id: int | None = None) -> bool:
    """Ask the session's running turn (or the one parked on a person) to stop, wherever it
    runs; False if none runs. `user_id`: who asked (the transcript names them). A parked
    turn goes back on the queue with the stop asked: the worker that claims it ends it
    without running it (its open calls closed, its prompts expired, its requests
    withdrawn)."""
    with transaction.atomic():
        running = list(
            Turn.objects.filter(
                session_id=session_id, status__in=[Turn.Status.RUNNING, Turn.Status.WAITING]
            ).values_list("pk", flat=True)
        )
        if running:
            # The first Stop names who stopped it; a second press changes nothing.
            Turn.objects.filter(pk__in=running, cancel_requested=False).update(
                cancel_requested=True, stopped_by_id=user_id, stopped_at=timezone.now()
            )
        cancelled = bool(running)
        for turn_id in running:
            db.wake_turn(turn_id)
        return cancelled


# -- parked on a person -------------------------------------------------------------------------
class Park:
    PARKED = "parked"
    # Something it waits on was answered (or a stop asked) before it could park: it goes on.
    ANSWERED = "answered"
    LOST = "lost"  # no longer this attempt's (taken back)


def turn_park(
    *,
    turn: Turn,
    worker_id: str,
    slot_ids: list[str],
    usage: Usage | None = None,
    model: str = "",
) -> str:
    """Park a running turn that waits on a person: `waiting`, no worker, no lease. What it
    waits on (its open slots and approval requests) stays open under the same ids; an
    answer, a decision, a Stop or an expiry puts it back on the queue (`turn_unpark`) and the
    next attempt continues from the stored conversation. `slot_ids`: the slots it waits on.

    The turn's row is locked while the answers are looked for, and `turn_unpark` takes the
    same lock after storing an answer: an answer either is seen here (ANSWERED: the turn
    goes on where it runs) or finds the turn parked and unparks it. Never both, never lost.
    `usage`: the tokens this attempt used, kept on the turn (the one that finishes it adds
    its own), so a turn that waited on a person costs all its model calls; and added to the
    session's usage of `model`, as `turn_finish` adds the finishing attempt's."""
    with transaction.atomic():
        held = (
            Turn.objects.select_for_update()
            .filter(
                pk=turn.pk,
                status=Turn.Status.RUNNING,
                worker_id=worker_id,
                attempts=turn.attempts,
            )
            .values_list("cancel_requested", flat=True)
            .first()
        )
        if held is None:
            return Park.LOST
        if held or _answers_waiting(turn.pk, slot_ids):
            return Park.ANSWERED
        usage = usage or Usage()
        Turn.objects.filter(pk=turn.pk).update(
            status=Turn.Status.WAITING,
            worker_id="",
            lease_until=None,
            tokens_in=F("tokens_in") + usage.tokens_in,
            tokens_out=F("tokens_out") + usage.tokens_out,
            cache_read_tokens=F("cache_read_tokens") + usage.cache_read,
            cache_write_tokens=F("cache_write_tokens") + usage.cache_write,
        )
        _add_session_usage(turn.session_id, model, usage)
        _event(turn, "turn.waiting", {"turn": turn.pk})
    return Park.PARKED


def _answers_waiting(turn_id: int, slot_ids: list[str]) -> bool:
    return TurnSlot.objects.filter(
        turn_id=turn_id, slot_id__in=slot_ids, status=TurnSlot.Status.ANSWERED
    ).exists() or approvals.decided_for_turn(turn_id, slot_ids)


def turn_unpark(*, turn_id: int) -> str | None:
    """An answer to what the turn waits on was stored in this transaction: a parked turn
    goes back on the queue (returns its session, whose task the caller enqueues at commit);
    a running one's worker is told to look (None)."""
    row = (
        Turn.objects.select_for_update()
        .filter(pk=turn_id)
        .values_list("status", "session_id")
        .first()
    )
    if row is None:
        return None
    status, session_id = row
    if status != Turn.Status.WAITING:
        _wake_worker(turn_id)
        return None
    Turn.objects.filter(pk=turn_id, status=Turn.Status.WAITING).update(
        status=Turn.Status.QUEUED, resumes=F("resumes") + 1, restarting=False
    )
    _event(Turn(id=turn_id, session_id=session_id), "turn.resumed", {"turn": turn_id})
    return session_id


def turn_slots_kept(turn: Turn) -> list[tuple[str, str | None, str, str, bool]]:
    """The slots earlier attempts of the turn pushed: (slot id, call id, renderer, status,
    waits for an answer).
    A continuing attempt gives a slot its tool pushes again the same id, so it finds the
    same row (and the same approval request, its answer or decision) instead of a new one."""
    if not turn.continues:
        return []
    return list(
        TurnSlot.objects.filter(turn_id=turn.pk)
        .order_by("pk")
        .values_list("slot_id", "call_id", "renderer", "status", "waits_for_answer")
    )


# -- slots ----------------------------------------------------------------------------------
def slot_public_id(turn_id: int, slot_id: str) -> str:
    return f"t{turn_id}-{slot_id}"


def calls_waiting(kept: list[tuple[str, str | None, str, str, bool]]) -> frozenset[str]:
    """The calls (the turn's own, or a subagent's on its turn) that were waiting on a person
    (a prompt still open or answered, of `turn_slots_kept`): the continuing attempt runs
    them again, even when not `retry_safe`, and they find their answers."""
    pending = (TurnSlot.Status.OPEN, TurnSlot.Status.ANSWERED)
    return frozenset(
        call_id for _, call_id, _, status, waits in kept if call_id and waits and status in pending
    )


# A slot an attempt closed: a later attempt that pushes it again waits on nothing.
CLOSED_SLOT_STATUSES = frozenset(
    {TurnSlot.Status.RESOLVED, TurnSlot.Status.REJECTED, TurnSlot.Status.EXPIRED}
)


class Kept:
    """What `slot_push` found of a slot an earlier attempt pushed (the same id): its row and,
    when it was answered or decided, the answer the waiting tool takes at once (or, when
    the customer dismissed it, `dismissed`: the tool's wait is rejected)."""

    __slots__ = ("answer", "answered", "dismissed", "row")

    def __init__(self, row: TurnSlot, answered: bool, answer: Any, dismissed: bool = False):
        self.row, self.answered, self.answer = row, answered, answer
        self.dismissed = dismissed


def slot_push(*, turn: Turn, slot: Any, template: str) -> TurnSlot | Kept | None:
    """Store a slot the turn's display pushed; None (nothing stored) when this attempt of
    the turn is no longer its worker's (taken back: the retry shows its own). A slot an
    earlier attempt stored under this id is found again (`Kept`): no second row, no second
    request, no second notification."""
    with transaction.atomic():
        if turn.worker_id and not turn_holds(turn):
            return None
        kept = TurnSlot.objects.filter(turn_id=turn.pk, slot_id=slot.id).first()
        if kept is not None:
            return _found_again(kept)
        shown = slot.input
        if slot.renderer == APPROVAL_RENDERER and isinstance(slot.input, dict):
            # The request staff decide on is its own row; the chat keeps what a customer
            # may see of it. Only `approval_decide` answers it, never the chat.
            request = approvals.approval_open(
                session_id=turn.session_id,
                prompt=slot.input,
                turn_id=turn.pk,
                slot_id=slot.id,
                call_id=slot.call_id,
            )
            shown = approvals.customer_prompt(slot.input, request)
        elif slot.renderer == PERMISSION_RENDERER and isinstance(slot.input, dict):
            shown = {**slot.input, **_call_reading(turn, slot.input)}
        row = TurnSlot.objects.create(
            turn=turn,
            session_id=turn.session_id,
            slot_id=slot.id,
            renderer=slot.renderer,
            input=shown,
            tool_name=slot.tool_name,
            call_id=slot.call_id,
            display_strategy=slot.display_strategy,
            waits_for_answer=slot.waits_for_answer,
            template=template,
        )
        _event(turn, "slot.pushed", {"slot_id": slot_public_id(turn.pk, slot.id)})
    return row


def _call_reading(turn: Turn, prompt: dict[str, Any]) -> dict[str, Any]:
    """The label and summary a customer reads of a pending call, beside its arguments."""
    agent_name = Session.objects.filter(pk=turn.session_id).values_list("agent_name", flat=True)
    name = agent_name.first()
    tool_name = str(prompt.get("toolName") or "")
    summary = call_summary(name, tool_name, prompt.get("toolInput"))
    return {
        "label": tool_label(name, tool_name),
        "summary": (summary.customer or summary.text) if summary else None,
    }


def _found_again(row: TurnSlot) -> Kept:
    if row.renderer == APPROVAL_RENDERER:
        decision = approvals.decision_for_slot(turn_id=row.turn_id, slot_id=row.slot_id)
        return Kept(row, decision is not None, decision)
    answered = row.status in (TurnSlot.Status.ANSWERED, TurnSlot.Status.RESOLVED) and isinstance(
        row.answer, dict
    )
    return Kept(
        row,
        answered,
        row.answer.get("value") if answered else None,
        dismissed=answered and is_dismissal(row.answer),
    )


def slot_close(*, turn: Turn, slot_id: str, status: str) -> None:
    """The worker's display dropped the slot (answered, completed, rejected). Nothing when
    this attempt of the turn is no longer its worker's: a stale attempt (its worker froze
    past the lease) drops its slots as it stops, and the retry waits on the same rows."""
    with transaction.atomic():
        if turn.worker_id and not turn_holds(turn):
            return
        # "removed": the turn dropped it unanswered (stopped, aborted): it can expire only.
        closed_as = {
            "resolved": TurnSlot.Status.RESOLVED,
            "rejected": TurnSlot.Status.REJECTED,
        }.get(status, TurnSlot.Status.EXPIRED)
        closed = TurnSlot.objects.filter(
            turn=turn,
            slot_id=slot_id,
            status__in=[TurnSlot.Status.OPEN, TurnSlot.Status.ANSWERED],
        ).update(status=closed_as)
        if closed:
            _event(turn, "slot.resolved", {"slot_id": slot_public_id(turn.pk, slot_id)})
        approvals.approval_delivered(turn_id=turn.pk, slot_id=slot_id)


# A slot's public id: "t<turn pk>-<slot id>" (ASCII digits only: "²".isdigit() is true).
_PUBLIC_SLOT_ID = re.compile(r"t([0-9]{1,18})-(.+)", re.DOTALL)
_SLOT_ID_LENGTH = TurnSlot._meta.get_field("slot_id").max_length


def slot_address(public_id: str) -> tuple[int, str] | None:
    """(turn pk, slot id) of a slot's public id, or None when it could name no slot."""
    match = _PUBLIC_SLOT_ID.fullmatch(public_id)
    if match is None or not input_rules.could_name_a_row(match[2], max_length=_SLOT_ID_LENGTH):
        return None
    return int(match[1]), match[2]


# A dismissed slot's stored answer. The worker then rejects the tool's wait, as Glove's
# `reject(slotId)` does (contract §6.1): the waiting tool throws, and the executor runs it
# again (§2.3: up to 3 more times; it may ask again with a fresh slot). A dismissed
# permission prompt is a "no" for that call only, nothing remembered.
DISMISSED_ANSWER: dict[str, Any] = {"dismissed": True}


def is_dismissal(answer: Any) -> bool:
    """Is this stored answer (a TurnSlot's `answer`) a dismissal?"""
    return isinstance(answer, dict) and answer.get("dismissed") is True and "value" not in answer


def slot_answer(
    *,
    session_id: str,
    public_id: str,
    value: Any = None,
    dismiss: bool = False,
    by: str = "",
    via: str = "",
) -> bool:
    """Answer a waiting prompt from any process; the worker running its turn picks it up.
    `dismiss`: close it unanswered instead (`DISMISSED_ANSWER`), whatever its renderer but
    an approval's. `by` and `via`: who answered (a username) and through which edge
    (`page`, `rest`). False when nothing waits on it (answered already, expired, unknown);
    ValueError when the answer is no storable JSON (NaN, NUL, lone surrogates), or a
    permission decision that is malformed (`DecisionRefused`: a decision other than
    approve/reject, a reason that is not text)."""
    address = slot_address(public_id)
    if address is None:
        return False
    turn_pk, slot_id = address
    if not dismiss:
        input_rules.check_json(value, "answer")
    with transaction.atomic():
        row = (
            TurnSlot.objects.filter(
                session_id=session_id,
                turn_id=turn_pk,
                slot_id=slot_id,
                status=TurnSlot.Status.OPEN,
                waits_for_answer=True,
                turn__status__in=ANSWERABLE_STATUSES,
            )
            .only("pk", "renderer")
            .first()
        )
        if row is None or row.renderer == APPROVAL_RENDERER:
            # An approval is decided through `approvals.services.approval_decide` only.
            return False
        decided = (
            permission_decision(value)
            if row.renderer == PERMISSION_RENDERER and not dismiss
            else None
        )
        if dismiss:
            stored = DISMISSED_ANSWER
        elif decided is not None:  # approve / reject (with a reason), checked: DecisionRefused
            stored = {"value": decided}
        elif row.renderer == PERMISSION_RENDERER:
            answer = value.get("value") if isinstance(value, dict) else value
            key = answer.strip().lower() if isinstance(answer, str) else answer
            if not isinstance(key, str | bool) or key not in PERMISSION_ANSWERS:
                return False
            stored = {"value": PERMISSION_ANSWERS[key]}
        else:
            stored = {"value": value}
        # Conditional: of two answers racing (two tabs, two servers), one wins.
        answered = bool(
            TurnSlot.objects.filter(pk=row.pk, status=TurnSlot.Status.OPEN).update(
                status=TurnSlot.Status.ANSWERED,
                answer=stored,
                answered_by=by[:150],
                answered_via=via[:10],
            )
        )
        if answered:
            # A turn parked on this prompt goes back on the queue in this transaction.
            db.wake_turn(turn_pk)
        return answered


def task_enqueued_notify() -> None:
    """Tell idle workers a task waits on the database queue: NOTIFY on PostgreSQL, a local
    wake-up on SQLite (`gloveapp.wake`). Sent at once outside a transaction, at commit
    inside one."""
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [TURNS_CHANNEL, TASK_ENQUEUED])
    else:
        wake_after_commit(WAKE_TURNS, TASK_ENQUEUED)


def _wake_worker(turn_id: int) -> None:
    db.notify_turn_worker(turn_id)


def _expire_slots(turn: Turn) -> None:
    # Cards that wait for nothing stay on the page after the turn; prompts cannot be
    # answered any more (a retried turn asks again).
    expired = TurnSlot.objects.filter(
        turn=turn,
        waits_for_answer=True,
        status__in=[TurnSlot.Status.OPEN, TurnSlot.Status.ANSWERED],
    ).update(status=TurnSlot.Status.EXPIRED)
    if expired:
        _event(turn, "slot.resolved", {"turn": turn.pk, "expired": expired})
    # Nothing waits for its approvals any more: they can no longer be decided.
    approvals.approvals_withdraw(turn_id=turn.pk)


# -- the timeline -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StepData:
    """A timeline step not stored yet (a worker keeps a few and stores them together)."""

    kind: str
    name: str
    started_at: Any
    duration_ms: int | None = None
    outcome: str = ""
    detail: dict[str, Any] | None = None


_STEP_TABLE = TurnStep._meta.db_table
_STEP_FIELDS = {field.name: field for field in TurnStep._meta.concrete_fields}
_STEP_BATCH = 200  # rows per INSERT (9 parameters each: within every backend's limit)
_STEP_INSERT = (
    f'INSERT INTO "{_STEP_TABLE}" ("turn_id", "attempt", "worker_id", "kind", "name", '
    '"started_at", "duration_ms", "outcome", "detail") VALUES '
)


def _insert_steps(turn_id: int, attempt: int, worker_id: str, steps: list[StepData]) -> None:
    """The rows `TurnStep.objects.bulk_create` would write (of the turn's `attempt`, run by
    `worker_id`), by a plain INSERT: every turn stores its timeline, and compiling the ORM's
    insert cost more than running it (bench/observe_overhead.py)."""
    connection = transaction.get_connection()
    name_length = _STEP_FIELDS["name"].max_length
    outcome_length = _STEP_FIELDS["outcome"].max_length
    started_at, detail = _STEP_FIELDS["started_at"], _STEP_FIELDS["detail"]
    with connection.cursor() as cursor:
        for start in range(0, len(steps), _STEP_BATCH):
            batch = steps[start : start + _STEP_BATCH]
            params: list[Any] = []
            for step in batch:
                params += [
                    turn_id,
                    attempt,
                    worker_id,
                    step.kind,
                    step.name[:name_length],
                    started_at.get_db_prep_save(step.started_at, connection),
                    step.duration_ms,
                    step.outcome[:outcome_length],
                    detail.get_db_prep_save(step.detail, connection),
                ]
            sql = _STEP_INSERT + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(batch))
            cursor.execute(sql, params)


def steps_record(*, turn: Turn, steps: list[StepData]) -> bool:
    """Store steps of `turn`'s timeline in one insert, inside the turn's fence: False
    (nothing written) when this attempt no longer holds the turn."""
    if not steps:
        return True
    with transaction.atomic():
        if not fence_holds(turn_fence(turn)):
            return False
        _insert_steps(turn.pk, turn.attempts, turn.worker_id, steps)
    return True


def step_record(
    *,
    turn: Turn,
    kind: str,
    name: str = "",
    started_at: Any,
    duration_ms: int | None = None,
    outcome: str = "",
    detail: dict[str, Any] | None = None,
) -> bool:
    """Store one step of `turn`'s timeline, inside the turn's fence (see `steps_record`)."""
    step = StepData(kind, name, started_at, duration_ms, outcome, detail)
    return steps_record(turn=turn, steps=[step])


def previous_attempt_worker(turn: Turn) -> str:
    """The worker that ran the attempt before this one (from its timeline step), or ""."""
    return (
        TurnStep.objects.filter(
            turn_id=turn.pk, kind=TurnStep.Kind.ATTEMPT, attempt__lt=turn.attempts
        )
        .order_by("-attempt")
        .values_list("worker_id", flat=True)
        .first()
        or ""
    )


_CLOSE_ATTEMPT_SQL = f"""
    UPDATE "{_STEP_TABLE}" SET "duration_ms" = %s, "outcome" = %s
     WHERE "turn_id" = %s AND "attempt" = %s AND "kind" = 'attempt' AND "worker_id" = %s
       AND "duration_ms" IS NULL
"""


def _close_attempt_step(
    turn_id: int, attempt: int, worker_id: str, *, started_at: Any, outcome: str
) -> None:
    """The attempt's step (stored with the claim) gets its duration and outcome: one
    statement when the attempt's start is known, else the step is read first."""
    now = timezone.now()
    if started_at is None:
        step = (
            TurnStep.objects.filter(
                turn_id=turn_id,
                kind=TurnStep.Kind.ATTEMPT,
                worker_id=worker_id,
                duration_ms__isnull=True,
            )
            .order_by("-attempt")
            .values_list("attempt", "started_at")
            .first()
        )
        if step is None:
            return
        attempt, started_at = step
    elapsed = max(int((now - started_at).total_seconds() * 1000), 0)
    outcome = outcome[: _STEP_FIELDS["outcome"].max_length]
    with prepared_cursor() as cursor:
        cursor.execute(_CLOSE_ATTEMPT_SQL, [elapsed, outcome, turn_id, attempt, worker_id])


def turn_steps_prune(*, older_than: timedelta) -> int:
    """Forget timeline steps that began more than `older_than` ago, in bounded batches;
    returns how many (GLOVE_RETAIN_TURN_STEPS_DAYS; they also go with their turn)."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    return delete_in_batches(TurnStep.objects.filter(started_at__lt=timezone.now() - older_than))


FINISHED_STATUSES = (Turn.Status.DONE, Turn.Status.FAILED, Turn.Status.CANCELLED)


def turns_prune(*, older_than: timedelta) -> int:
    """Forget turns that finished more than `older_than` ago, with their prompts, in bounded
    batches; returns how many. A turn not finished (queued, running, waiting) stays whatever
    its age; the messages a turn wrote belong to the session and stay. The turn worker's
    scheduler runs it (GLOVE_RETAIN_TURNS_DAYS)."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    cut = timezone.now() - older_than
    # Turns are created in id order: the first turn created after the cut bounds the scan
    # (read from the primary key's start, where only the turns about to go lie before it),
    # so no index on the timestamps is needed and each batch reads only its candidates.
    boundary = (
        Turn.objects.filter(created_at__gte=cut).order_by("id").values_list("id", flat=True)[:1]
    )
    candidates = Turn.objects.filter(
        status__in=FINISHED_STATUSES, created_at__lt=cut, finished_at__lt=cut
    )
    first_kept = list(boundary)
    if first_kept:
        candidates = candidates.filter(id__lt=first_kept[0])
    return delete_in_batches(candidates)
