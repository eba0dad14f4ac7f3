"""The claim: a queued turn becomes this worker's `running` one in one conditional UPDATE,
and the partial unique index `one_running_turn_per_session` refuses a second running turn of
the same session, so two workers (or two processes) racing for a session cannot both win.
Also the way back (a turn released to the queue) and what an earlier attempt stored.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.utils import timezone

from gloveapp.budgets import services as budgets
from gloveapp.conversations.models import Message, Session
from gloveapp.lib.db.prepared import prepared_cursor, sql_datetime
from gloveapp.turns.events import turn_event
from gloveapp.turns.models import Turn, TurnStep
from gloveapp.turns.steps import StepData, insert_steps, previous_attempt_worker

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
              cancel_requested, trace_parent, restarting, agent_version_id
"""


def turn_claim_next(*, session_id: str, worker_id: str) -> Turn | None:
    """Claim the session's oldest queued turn for `worker_id`, or None (running elsewhere,
    nothing queued, or another worker won the race).

    Raw SQL, prepared on PostgreSQL: the ORM's three queries for this cost more than a
    turn's every other bookkeeping (profiled)."""
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
    trace_parent, restarting, agent_version_id = row[9], row[10], row[11]
    values = {
        "id": turn_id,
        "session_id": session_id,
        "text": text,
        "source": source,
        "user_id": user_id,
        "status": Turn.Status.RUNNING,
        "attempts": attempts,
        "resumes": resumes,
        "cancel_requested": bool(cancel),
        "worker_id": worker_id,
        "lease_until": lease,
        "base_seq": base_seq,
        "created_at": created_at,
        "started_at": now,
        "trace_parent": trace_parent or "",
        "restarting": bool(restarting),
        "agent_version_id": agent_version_id,
    }
    # A row of the database (`Model.from_db`: saved, not being added), every other field at
    # its default as a fresh `Turn(...)` would have it.
    fields = Turn._meta.concrete_fields
    turn = Turn.from_db(
        DEFAULT_DB_ALIAS,
        [field.attname for field in fields],
        [
            values[field.attname] if field.attname in values else field.get_default()
            for field in fields
        ],
    )
    # The worker of the attempt before a retry (its timeline step says; "" when none).
    if attempts > 1:
        # An earlier attempt that lost the database mid-call (`turn_release`) left its
        # reservations open: settled at their maximum before this attempt reserves its own.
        budgets.budget_reservations_close(turn_id=turn_id, below_attempt=attempts)
    turn.previous_worker = previous_attempt_worker(turn) if turn.retried else ""
    with transaction.atomic():
        turn_event(
            turn,
            "turn.restarted" if turn.retried else "turn.started",
            {"turn": turn.pk, "text": turn.text, "attempt": turn.attempts, "resumes": resumes},
        )
        if settings.GLOVE_TIMELINE_MAX_STEPS > 0:
            # The attempt's timeline step, with the claim: a worker that dies mid-turn still
            # leaves who ran the attempt (its duration stays empty), at no cost of its own.
            detail = {"previous_worker": turn.previous_worker} if turn.retried else None
            step = StepData(TurnStep.Kind.ATTEMPT, f"attempt {attempts}", now, detail=detail)
            insert_steps(turn.pk, attempts, worker_id, [step])
    return turn


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
