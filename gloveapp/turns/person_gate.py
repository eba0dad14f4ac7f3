"""The turns' side of a human stretch: while a person (or the queue) answers a chat, no turn
calls the model and no agent message is stored (`conversations.handoff` owns the state).

Three gates, each cheap and each sufficient for its moment:
- a message posted while the agent does not answer is stored as the customer's message and
  its turn is finished at once (`turn_for_a_person`, under the session's lock in
  `turn_submit`): nothing is queued, no worker runs;
- a turn claimed, or about to call its model, while the agent does not answer raises
  `PersonAnswers` (`check_agent_answers`);
- every write of a running turn carries `agent_answers_fence` in the append's own statement,
  so a turn already running when a person takes over stores nothing more: its reply is
  WITHHELD (refused by the append, the turn ends as done with nothing said) and its request,
  if it was not stored yet, is kept as the customer's message (`turn_withheld`).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from gloveapp.agents.config import get_agent_spec
from gloveapp.agents.handoff_config import handoff_of
from gloveapp.conversations import handoff
from gloveapp.conversations.append import Fence
from gloveapp.conversations.models import HandoffRecord, Session
from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import session_stream
from gloveapp.turns.handoff_usage import count_resolved_after_hand_back
from gloveapp.turns.models import Turn

WITHHELD = "withheld: a person answers this chat"
WITHHELD_NOTE = "A person took the chat over; the agent's reply was withheld."
# A turn the model refused (its provider's stop reason): done, and counted by the rule below.
REFUSED = "refused"
REFUSALS = frozenset({"refusal", "content_filter"})


class PersonAnswers(Exception):
    """The chat is a person's (or waits for one): the turn stops without answering."""


def gated_fence(turn: Turn, fence: Fence) -> Fence:
    """The turn's fence and the condition that the agent still answers the chat."""
    gate = handoff.agent_answers_fence(turn.session_id, turn.pk)
    return Fence(
        condition=f"{fence.condition} AND {gate.condition}", params=(*fence.params, *gate.params)
    )


def check_agent_answers(turn: Turn) -> None:
    """Raise `PersonAnswers` unless the agent may answer the turn's chat now."""
    if not handoff.agent_answers(turn.session_id, turn.pk):
        raise PersonAnswers(turn.session_id)


def turn_for_a_person(
    *, session_id: str, text: str, user_id: int | None, source: str
) -> tuple[Turn, int]:
    """A message posted while a person answers: stored as the customer's message, and a
    turn that is done at once (so a client following the turn sees it end), in the caller's
    transaction, which holds the session's lock. The turn and the id of its `turn.queued`
    event."""
    handoff.customer_message(session_id=session_id, text=text)
    now = timezone.now()
    turn = Turn.objects.create(
        session_id=session_id,
        text=text,
        user_id=user_id,
        source=source,
        status=Turn.Status.DONE,
        error=WITHHELD,
        started_at=now,
        finished_at=now,
    )
    stream = session_stream(session_id)
    queued_event = record_event(stream=stream, type="turn.queued", payload={"turn": turn.pk}).seq
    record_event(
        stream=stream,
        type="turn.finished",
        payload={"turn": turn.pk, "text": "", "answeredBy": "person"},
    )
    return turn, queued_event


def turn_withheld(*, turn: Turn, request_stored: bool) -> None:
    """A turn stopped because a person answers: its request is kept as the customer's
    message if the turn had not stored it yet (nothing the customer said is lost)."""
    if request_stored:
        return
    with transaction.atomic():
        handoff.customer_message(session_id=turn.session_id, text=turn.text)


def after_turn(*, turn: Turn, status: str, error: str) -> bool:
    """The agent's rule "hand off after N turns that failed or were refused": True when this
    turn was the Nth in a row (since the chat's last change of who answers), and the chat
    went to the agent's group's queue. A turn that ended done may resolve a chat handed
    back (`handoff_usage`)."""
    count_resolved_after_hand_back(turn=turn, status=status, error=error)
    if status != Turn.Status.FAILED and error != REFUSED:
        return False
    agent_name = Session.objects.values_list("agent_name", flat=True).filter(pk=turn.session_id)
    try:
        config = handoff_of(get_agent_spec(agent_name.first() or ""))
    except ImproperlyConfigured:
        return False  # an agent gone from the settings: its system check says so
    bound = config.after_failed_turns
    if not bound:
        return False
    # Only the turns since the last human stretch count: a chat handed back does not bounce
    # straight back to the queue on its next failure.
    last_change = (
        HandoffRecord.objects.filter(session_id=turn.session_id)
        .exclude(kind=HandoffRecord.Kind.NOTE)
        .order_by("-id")
        .values_list("created_at", flat=True)
        .first()
    )
    recent = Turn.objects.filter(session_id=turn.session_id, finished_at__isnull=False)
    if last_change is not None:
        recent = recent.filter(created_at__gt=last_change)
    outcomes = list(recent.order_by("-id").values_list("status", "error")[:bound])
    failed = [s == Turn.Status.FAILED or e == REFUSED for s, e in outcomes]
    if len(failed) < bound or not all(failed):
        return False
    try:
        handoff.handoff_request(
            session_id=turn.session_id,
            reason=f"{bound} turns in a row failed or were refused",
            group=config.group,
            actor=handoff.Actor(label=f"rule: after {bound} failed turns"),
            via="rule",
        )
    except handoff.HandoffConflict:
        return False
    return True
