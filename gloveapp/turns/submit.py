"""Queueing a turn: a message submitted (bounded per session and per user), a queued one
withdrawn before it runs, a mesh peer's wake-up (coalesced with one already queued)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from gloveapp.agents.config import default_agent_name
from gloveapp.budgets import services as budgets
from gloveapp.budgets.applying import subject_for
from gloveapp.conversations.models import Answerer, Session
from gloveapp.observe import tracing
from gloveapp.turns import person_gate
from gloveapp.turns.events import turn_event
from gloveapp.turns.models import LIVE_STATUSES, Turn
from gloveapp.turns.webhooks import turn_webhook_due
from gloveapp.versions.selectors import published_version

# `Turn.source` of a mesh peer's wake-up.
MESH_SOURCE = "mesh"


class QueueFull(Exception):
    """Too many messages are already waiting behind this session's running turn."""


class TurnLimitReached(Exception):
    """A budget refuses the turn (the user's turns per minute among them,
    GLOVE_TURNS_PER_USER_PER_MINUTE): `budget` names it, `retry_after` the seconds until its
    window opens again (None: unknown)."""

    def __init__(
        self, message: str, *, budget: str | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.budget = budget
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class QueuedTurn:
    """A turn `turn_submit` queued: the turn, how many turns ran or waited before it (as its
    transaction saw them), and the id of its `turn.queued` event (where a client that
    follows the turn starts its stream)."""

    turn: Turn
    ahead: int
    queued_event: int


def turn_submit(
    *, session_id: str, text: str, user_id: int | None, source: str = "page"
) -> QueuedTurn:
    """Queue `text` as the session's next turn; the caller enqueues the task after commit.

    Raises `QueueFull` past GLOVE_MAX_QUEUED_MESSAGES waiting messages, and
    `TurnLimitReached` past the user's turns per minute: every turn is a paid model call.
    """
    with transaction.atomic():
        # The bounds are counts read before the insert: without a lock, concurrent posts
        # all read the same count and all insert (20 of 20 did, with a bound of 5). The
        # session's row lock makes count-then-insert one decision per session on
        # PostgreSQL; SQLite's transactions begin IMMEDIATE, so its writers are serial.
        # The user's turns per minute are a budget's counter row, locked below.
        agent_name, answerer = (
            Session.objects.select_for_update()
            .filter(pk=session_id)
            .values_list("agent_name", "answerer")
            .first()
        ) or ("", None)
        if answerer not in (None, Answerer.AGENT):
            # A person answers (or the chat waits for one): the message is theirs to read,
            # no turn is queued and no model call counted. Under the lock above, so a
            # hand-back is before or after it.
            turn, queued_event = person_gate.turn_for_a_person(
                session_id=session_id, text=text, user_id=user_id, source=source
            )
            return QueuedTurn(turn=turn, ahead=0, queued_event=queued_event)
        since = timezone.now() - timedelta(minutes=1)
        # The pointer as it is now: a version published after this runs from the next turn.
        agent = agent_name or default_agent_name()
        published = published_version(agent)
        # The budgets with a cap of turns count this one (the user's turns per minute is one
        # of them; the published version's are there too), exactly: a counter row per
        # window, locked, not a count read before.
        try:
            budgets.budget_admit_turn(
                subject=subject_for(
                    user_id=user_id,
                    agent=agent,
                    session_id=session_id,
                    version_rules=published.budget_rules,
                )
            )
        except budgets.BudgetExceeded as refused:
            raise TurnLimitReached(
                str(refused), budget=refused.budget, retry_after=refused.retry_after
            ) from None
        if user_id is None and source == MESH_SOURCE:
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
            agent_version_id=published.version_id,
        )
        # Every page of the chat lists what waits (a second tab, after a reload). Its id is
        # where a client that follows the turn starts its stream (the REST start's answer).
        return QueuedTurn(
            turn=turn,
            ahead=waiting + live["running"],
            queued_event=turn_event(turn, "turn.queued", {"turn": turn.pk}),
        )


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
            turn_webhook_due(turn_id=turn_id, outcome=Turn.Status.CANCELLED)
            turn_event(Turn(id=turn_id, session_id=session_id), "turn.withdrawn", {"turn": turn_id})
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
        queued = turn_submit(session_id=session_id, text=text, user_id=user_id, source=MESH_SOURCE)
        return queued.turn
