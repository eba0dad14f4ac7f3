"""Leases: a worker renews those of its running turns; turns whose worker stopped renewing
are taken back (run again, or failed after GLOVE_TURN_MAX_ATTEMPTS), and sessions whose
queued turn nobody started are found again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from gloveapp.budgets import services as budgets
from gloveapp.conversations.locks import session_lock
from gloveapp.turns.events import turn_event
from gloveapp.turns.lifecycle import close_open_calls, turn_failed_text
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.slots import expire_slots
from gloveapp.turns.webhooks import turn_webhook_due


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
            # The session's row before the turn's and the stream's, as every fenced append.
            session_lock(turn.session_id)
            # Continuations after a wait on a person are no restarts: they do not count. Nor
            # is a take-back of a turn that waited on a person when its worker died: the
            # wait is the database's, not the worker's, and survives any number of deaths.
            waited = _waits_on_a_person(turn.pk)
            gave_up = (
                not waited and turn.attempts - turn.resumes >= settings.GLOVE_TURN_MAX_ATTEMPTS
            )
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
                resumes=F("resumes") + 1 if waited else F("resumes"),
            )
            if taken != 1:
                continue
            # Whoever takes the turn back settles what the dead attempt's calls reserved.
            budgets.budget_reservations_close(turn_id=turn.pk, now=now)
            # A worker's death is not a stop: what the turn waits on (a prompt, a request
            # with its e-mails sent) stays open, and the retry finds it again by slot id.
            if gave_up:
                turn_webhook_due(turn_id=turn.pk, outcome=Turn.Status.FAILED)
                expire_slots(turn)
                close_open_calls(turn.pk, status=Turn.Status.FAILED, error=turn_failed_text())
                turn_event(turn, "turn.error", {"turn": turn.pk, "message": turn_failed_text()})
        sessions.append(turn.session_id)
    return sessions


def _waits_on_a_person(turn_id: int) -> bool:
    """Whether the turn waits on a person: a prompt, a slot or an approval request of its
    own open (or answered, not taken yet)."""
    return TurnSlot.objects.filter(
        turn_id=turn_id,
        waits_for_answer=True,
        status__in=[TurnSlot.Status.OPEN, TurnSlot.Status.ANSWERED],
    ).exists()


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
