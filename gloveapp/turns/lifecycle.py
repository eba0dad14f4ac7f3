"""A turn's end: finished (done, failed, stopped) with its usage and its timeline, a note
on a running turn, a stop asked for, the open calls a stopped or failed turn leaves
closed, and finished turns forgotten after GLOVE_RETAIN_TURNS_DAYS."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from gloveapp.conversations.locks import session_lock
from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.services import messages_append
from gloveapp.core.agent import TOOL_RESULTS_TEXT
from gloveapp.core.executor import ABORTED_MESSAGE
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import ToolResult, ToolResultData
from gloveapp.lib import turn_waking
from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.lib.db.prepared import prepared_cursor, sql_datetime
from gloveapp.observe.cost import Usage
from gloveapp.turns import person_gate
from gloveapp.turns.events import turn_event
from gloveapp.turns.models import Turn
from gloveapp.turns.session_usage import add_session_usage
from gloveapp.turns.slots import expire_slots
from gloveapp.turns.steps import StepData, close_attempt_step, insert_steps
from gloveapp.turns.webhooks import turn_webhook_due

_TURN = Turn._meta.db_table
_FINISH_SQL = f"""
    UPDATE {_TURN} SET status = %s, error = %s, finished_at = %s, lease_until = NULL,
           model = %s, tokens_in = tokens_in + %s, tokens_out = tokens_out + %s,
           cache_read_tokens = cache_read_tokens + %s,
           cache_write_tokens = cache_write_tokens + %s
     WHERE id = %s AND status = 'running' AND worker_id = %s
    RETURNING session_id
"""


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
    session_id = Turn.objects.filter(pk=turn_id).values_list("session_id", flat=True).first()
    if session_id is None:
        return False
    with transaction.atomic():
        # The session's row before the turn's and the stream's, as every (fenced) append.
        session_lock(session_id)
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
        turn_webhook_due(turn_id=turn_id, outcome=status)
        add_session_usage(row[0], model, usage)
        close_attempt_step(turn_id, attempt, worker_id, started_at=started_at, outcome=status)
        if steps:
            insert_steps(turn_id, attempt, worker_id, steps)
        if prompted:
            expire_slots(turn)
        if status in (Turn.Status.CANCELLED, Turn.Status.FAILED):
            close_open_calls(turn_id, status=status, error=error)
        if status == Turn.Status.DONE:
            turn_event(turn, "turn.finished", {"turn": turn_id, "text": reply})
        elif status == Turn.Status.CANCELLED:
            turn_event(turn, "turn.error", {"turn": turn_id, "message": "The turn was stopped."})
        else:
            turn_event(turn, "turn.error", {"turn": turn_id, "message": error})
        # The agent's "hand off after N failed turns" rule, with the end it counts: a
        # caller that sees the turn end sees the chat in the queue too.
        person_gate.after_turn(turn=turn, status=status, error=error)
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
        turn_event(turn, "turn.notice", {"turn": turn_id, "notice": text})
    return True


def turn_failed_text() -> str:
    return "The server running this turn stopped several times; send the message again."


def close_open_calls(turn_id: int, *, status: str, error: str) -> None:
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
            turn_waking.wake_turn(turn_id)
        return cancelled


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
