"""Who answers a chat: the agent, a group's queue, one staff member, or nobody (closed).

Every change of `Session.answerer` is one function here, in a transaction, each one row of
`TRANSITIONS` (the states it leaves and enters) carried out by `_transition` as a conditional
UPDATE of the session's row: a transition that finds the chat in another state (a second
claimant, a hand-back by someone who does not hold it) changes nothing and raises
`HandoffConflict`, naming who answers now (the edges answer 409). Each one writes, with the
change, an audit record (`HandoffRecord`: who, when, why), an event on the session's stream
(`session.answerer`, what the customer's page and the turn's followers read) and one on the
staff console's stream (`handoffs`).

    handoff_request(session_id=..., reason="...", by=customer, via="page")   # agent -> queued
    handoff_claim(session_id=..., staff=bea)                                 # queued -> person
    handoff_take_over(session_id=..., staff=bea, reason="...")               # agent -> person
    staff_reply(session_id=..., staff=bea, text="...")                        # a message
    staff_note(session_id=..., staff=bea, text="...")                         # internal
    handoff_hand_back(session_id=..., staff=bea, summary="...")               # person -> agent
    handoff_close(session_id=..., staff=bea)                                  # -> closed

The model's context marks both ends of a human stretch with framework notes
(`framework_context="handoff"`): `HANDOFF_STARTED` when the agent stops answering and
`HANDOFF_ENDED` when a person hands the chat back, naming the person, the messages they
handled and their summary, and saying that anything said before about a person answering no
longer holds. The turns never call the model or store an agent message while the agent does
not answer (`agent_answers_fence`, checked by the append itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from gloveapp.agents.handoff_config import agent_handoff_group
from gloveapp.conversations.append import Appended, Fence
from gloveapp.conversations.handoff_bounds import on_queued
from gloveapp.conversations.handoff_texts import (
    AUTHOR_KEY,
    HANDOFF_ENDED,
    HANDOFF_FRAMEWORK_CONTEXT,
    HANDOFF_STARTED,
    queue_entered,
)
from gloveapp.conversations.models import Answerer, HandoffRecord, Session
from gloveapp.conversations.services import messages_append
from gloveapp.core import input_rules
from gloveapp.core.types import Message as CoreMessage
from gloveapp.live.eventlog import record_event, record_stream_events
from gloveapp.live.streams import handoffs_stream, session_stream
from gloveapp.observe import metrics

MAX_REASON = 500
MAX_TEXT = 10_000
# How many hand-back notes a compaction summary carries forward (`kept_handoff_notes`).
KEPT_NOTES = 3

SESSION_EVENT = "session.answerer"
CONSOLE_EVENT = "handoff.changed"


class HandoffConflict(Exception):
    """The chat is not in a state that allows this change; `current` says who answers."""

    def __init__(self, message: str, *, current: dict[str, Any]) -> None:
        super().__init__(message)
        self.current = current


class HandoffInvalid(ValueError):
    """A field of the request is wrong; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Actor:
    """Who changes the chat: a user, or a label when nobody logged in did (the agent)."""

    user: Any = None
    label: str = ""

    @property
    def words(self) -> str:
        return person_name(self.user) if self.user is not None else self.label or "someone"


def person_name(user: Any) -> str:
    """How a customer reads a staff member's name: first name, else the username."""
    if user is None:
        return ""
    return (getattr(user, "first_name", "") or "").strip() or user.get_username()


def person_label(user: Any, group: str) -> str:
    """ "Bea from the baristas", or "Bea" when no group is named."""
    name = person_name(user)
    return f"{name} from the {group}" if group else name


def answerer_of(session: Session) -> dict[str, Any]:
    """Who answers the chat, as the API and the events say it."""
    person = session.answerer_person if session.answerer_person_id else None
    return {
        "state": session.answerer,
        "group": session.answerer_group or None,
        "person": person_name(person) if person is not None else None,
        "label": answerer_words(session),
        "since": session.answerer_since.isoformat() if session.answerer_since else None,
    }


def answerer_words(session: Session) -> str:
    if session.answerer == Answerer.PERSON and session.answerer_person_id:
        return f"{person_label(session.answerer_person, session.answerer_group)} answers this chat"
    if session.answerer == Answerer.QUEUED:
        group = session.answerer_group
        return f"This chat waits for a person{f' from the {group}' if group else ''}"
    if session.answerer == Answerer.CLOSED:
        return "This chat is closed"
    return "The agent answers this chat"


def _checked_text(value: Any, field: str, *, required: bool, max_length: int) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise HandoffInvalid(field, f"{field} must be a string.")
    value = value.strip()
    if required and not value:
        raise HandoffInvalid(field, f"{field} may not be empty.")
    if len(value) > max_length:
        raise HandoffInvalid(field, f"{field} is longer than {max_length} characters.")
    if "\x00" in value:
        raise HandoffInvalid(field, f"{field} may not contain NUL characters.")
    return value


def checked_group(value: Any) -> str:
    group = _checked_text(value, "group", required=False, max_length=150)
    if group and not input_rules.could_name_a_row(group, max_length=150):
        raise HandoffInvalid("group", "group is not a group's name.")
    return group


# -- who may act -------------------------------------------------------------------------------


def is_staff_member(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def in_group(user: Any, group: str) -> bool:
    """May `user` work the queue of `group`? Staff in it (any staff for no group), or a
    superuser."""
    if not is_staff_member(user):
        return False
    if user.is_superuser or not group:
        return True
    return user.groups.filter(name=group).exists()


def chat_group(session: Session, agent_group: str = "") -> str:
    """The group a chat belongs to: its queue's, else its agent's handoff group."""
    return session.answerer_group or agent_group


def may_handle(user: Any, session: Session, *, agent_group: str = "") -> bool:
    """May staff member `user` see and act on this chat on the console? Its group's staff,
    the person who holds it, a superuser. Anyone else is an outsider (404)."""
    if not is_staff_member(user):
        return False
    if session.answerer == Answerer.PERSON and session.answerer_person_id == user.pk:
        return True
    return in_group(user, chat_group(session, agent_group))


# -- the gate the turns write through ----------------------------------------------------------

_SESSION = Session._meta.db_table
# The agent answers, or the chat waits in the queue its own turn put it in (the turn that
# asked for a person still stores its tool's result and its closing words). Share-locked on
# PostgreSQL, as the turn's fence is: a transition waits for the append, and an append that
# waited for a transition sees it.
_AGENT_ANSWERS_SQL = (
    f"EXISTS (SELECT 1 FROM {_SESSION} WHERE id = %s AND (answerer = 'agent' "
    "OR (answerer = 'queued' AND answerer_turn_id = %s)){lock})"
)


def agent_answers_fence(session_id: str, turn_id: int | None) -> Fence:
    """The condition under which a turn may still write the agent's part of the chat."""
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    return Fence(
        condition=_AGENT_ANSWERS_SQL.replace("{lock}", lock), params=(session_id, turn_id or 0)
    )


def agent_answers(session_id: str, turn_id: int | None = None) -> bool:
    """Whether the agent may answer the chat now (a model call is about to be made)."""
    return (
        Session.objects.filter(pk=session_id)
        .filter(Q(answerer=Answerer.AGENT) | Q(answerer=Answerer.QUEUED, answerer_turn_id=turn_id))
        .exists()
        if turn_id is not None
        else Session.objects.filter(pk=session_id, answerer=Answerer.AGENT).exists()
    )


# -- transitions -------------------------------------------------------------------------------


def _current(session_id: str) -> Session:
    session = Session.objects.select_related("answerer_person").filter(pk=session_id).first()
    if session is None:
        raise Session.DoesNotExist(session_id)
    return session


def _conflict(session_id: str, wanted: str) -> HandoffConflict:
    session = _current(session_id)
    words = answerer_words(session)
    if words.startswith(("The ", "This ")):
        words = words[0].lower() + words[1:]
    return HandoffConflict(f"Cannot {wanted}: {words}.", current=answerer_of(session))


def _note(session: Session, text: str) -> None:
    """A framework note in the history: the model reads it, the page shows it as a note.
    `session` (the locked row) is kept current: its `last_seq` is the note's."""
    appended = messages_append(
        session_id=session.pk,
        messages=[
            CoreMessage(sender="user", text=text, framework_context=HANDOFF_FRAMEWORK_CONTEXT)
        ],
    )
    session.last_seq = appended[-1].seq


# The ways in a metric's `via` label takes (bounded: anything else counts as "api").
VIAS = {name: name for name in ("page", "api", "tool", "rule", "console")}


def _count(record: Any, session: Session, **labels: Any) -> None:
    """A metric, once the change it counts has committed."""
    agent = session.agent_name or "default"
    transaction.on_commit(lambda: record(agent=agent, **labels))


def _note_then_stretch(session: Session, text: str) -> None:
    """The note that starts a human stretch; the stretch's first message is the next one.
    The transition set `handoff_from_seq` to the seq after the note's already (its row is
    locked, so the note is the next message): only a different seq costs an UPDATE."""
    _note(session, text)
    if session.handoff_from_seq != session.last_seq + 1:
        session.handoff_from_seq = session.last_seq + 1
        Session.objects.filter(pk=session.pk).update(handoff_from_seq=session.handoff_from_seq)


def _after_the_note(row: Session) -> int:
    """The first message of a human stretch that a note (the next message) starts."""
    return row.last_seq + 2


def _announce(session: Session, record: HandoffRecord, words: str) -> None:
    payload = {
        "event": record.kind,
        "answerer": answerer_of(session),
        "text": words,
        "by": record.actor_label,
        "reason": record.reason,
    }
    # One insert for both streams, the chat's first (the order every writer locks them in).
    record_stream_events(
        [
            (session_stream(session.pk), SESSION_EVENT, payload),
            (handoffs_stream(record.group), CONSOLE_EVENT, {"session": session.pk, **payload}),
        ]
    )


def _record(
    session_id: str,
    kind: str,
    *,
    from_state: str,
    to_state: str,
    actor: Actor,
    via: str,
    group: str = "",
    reason: str = "",
    text: str = "",
    from_seq: int | None = None,
    to_seq: int | None = None,
) -> HandoffRecord:
    return HandoffRecord.objects.create(
        session_id=session_id,
        kind=kind,
        from_state=from_state,
        to_state=to_state,
        actor=actor.user,
        actor_label=actor.words[:150],
        via=via[:20],
        group=group,
        reason=reason,
        text=text,
        from_seq=from_seq,
        to_seq=to_seq,
    )


def _locked(session_id: str) -> Session:
    """The chat's row, locked until the transaction ends (on SQLite the transaction's BEGIN
    IMMEDIATE holds every writer off already). Its person is not joined: every transition
    but a close names the person it leaves the chat to (or none)."""
    return Session.objects.select_for_update().get(pk=session_id)


@dataclass(frozen=True, slots=True)
class Left:
    """What a transition found in the chat's row before it changed it."""

    state: str
    group: str
    since: Any
    from_seq: int | None


def _move(
    session_id: str, *, from_states: tuple[str, ...], extra: Q | None = None, **changes: Any
) -> tuple[Left, Session] | None:
    """The conditional UPDATE every transition is: the chat's row changes only if it is in
    one of `from_states` now (two claimants: exactly one gets its row). A change is a
    value or a function of the locked row (`lambda row: row.last_seq + 1`), never an
    expression such as `F(...)`: the row in memory is what was written, unread. Returns what
    the row held before and the row as the UPDATE left it, or None."""
    session = _locked(session_id)
    before = Left(
        session.answerer, session.answerer_group, session.answerer_since, session.handoff_from_seq
    )
    values = {name: value(session) if callable(value) else value for name, value in changes.items()}
    values["answerer_since"] = timezone.now()
    condition = Q(pk=session_id, answerer__in=from_states)
    if extra is not None:
        condition &= extra
    # The row is locked by the read above, so `before` is still its state; the condition
    # stays in the UPDATE all the same, the one rule of who wins.
    if not Session.objects.filter(condition).update(**values):
        return None
    # Locked, the row is now the read one with these values: no need to read it back.
    for name, value in values.items():
        setattr(session, name, value)
    return before, session


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of who answers: the states it leaves, the one it enters, and what a
    conflicting caller is told it could not do ("Cannot claim this chat: ...")."""

    from_states: tuple[str, ...]
    to_state: str
    wanted: str
    # The hand-back records the human stretch it ends (its first and last message).
    ends_stretch: bool = False


TRANSITIONS: dict[str, Transition] = {
    HandoffRecord.Kind.REQUESTED: Transition(
        (Answerer.AGENT, Answerer.CLOSED), Answerer.QUEUED, "ask for a person"
    ),
    HandoffRecord.Kind.CLAIMED: Transition((Answerer.QUEUED,), Answerer.PERSON, "claim this chat"),
    HandoffRecord.Kind.TAKEN_OVER: Transition(
        (Answerer.AGENT, Answerer.QUEUED), Answerer.PERSON, "take over this chat"
    ),
    HandoffRecord.Kind.HANDED_BACK: Transition(
        (Answerer.PERSON,), Answerer.AGENT, "hand this chat back", ends_stretch=True
    ),
    HandoffRecord.Kind.CLOSED: Transition(
        (Answerer.QUEUED, Answerer.PERSON), Answerer.CLOSED, "close this chat"
    ),
}


def _transition(
    session_id: str,
    kind: str,
    *,
    actor: Actor,
    via: str,
    group: str | None = None,
    reason: str = "",
    text: str = "",
    extra: Q | None = None,
    **changes: Any,
) -> tuple[Session, HandoffRecord, Left]:
    """Every transition: the guarded UPDATE of `TRANSITIONS[kind]` (or `HandoffConflict`
    naming who answers) and its audit record, in the caller's transaction. `group`: the
    record's, by default the chat's queue's (as the change left it; as it was when the
    change leaves none, a hand-back). Returns the row as the change
    left it, the record, and what the row held before."""
    rule = TRANSITIONS[kind]
    moved = _move(
        session_id, from_states=rule.from_states, extra=extra, answerer=rule.to_state, **changes
    )
    if moved is None:
        raise _conflict(session_id, rule.wanted)
    before, session = moved
    record = _record(
        session_id,
        kind,
        from_state=before.state,
        to_state=rule.to_state,
        actor=actor,
        via=via,
        group=(session.answerer_group or before.group) if group is None else group,
        reason=reason,
        text=text,
        from_seq=(before.from_seq or 1) if rule.ends_stretch else None,
        to_seq=session.last_seq if rule.ends_stretch else None,
    )
    return session, record, before


def handoff_request(
    *,
    session_id: str,
    reason: Any = "",
    group: Any = "",
    actor: Actor,
    via: str,
    turn_id: int | None = None,
) -> Session:
    """The agent stops answering; the chat waits for a person of `group` (by default its
    agent's handoff group) (agent or closed -> queued). `turn_id`: the turn whose agent asked
    (its own closing writes still land). Returns the chat's row as the change left it."""
    reason = _checked_text(reason, "reason", required=False, max_length=MAX_REASON)
    group = checked_group(group)
    with transaction.atomic():
        if not group:
            agent_name = Session.objects.values_list("agent_name", flat=True).filter(pk=session_id)
            group = agent_handoff_group(agent_name.first() or "")
        session, record, _ = _transition(
            session_id,
            HandoffRecord.Kind.REQUESTED,
            actor=actor,
            via=via,
            group=group,
            reason=reason,
            answerer_group=group,
            answerer_person=None,
            answerer_turn_id=turn_id,
            # The agent's own request writes no note: its stretch starts at the next message.
            handoff_from_seq=(lambda row: row.last_seq + 1) if turn_id else _after_the_note,
            queue_told_at=None,
        )
        queue_entered(record, "handoff")
        who = f"a person from the {group}" if group else "a person"
        if turn_id is None:
            # The agent's own request says so in its tool's result (a note between its call
            # and the result would break the call/result pairing a provider expects).
            _note_then_stretch(session, started_note(who=who, reason=reason, by=actor.words))
        _announce(session, record, f"You will be answered by {who} here.")
        _count(metrics.handoff_requested, session, via=VIAS.get(via, "api"))
        if turn_id is None:
            # (An agent's own request is mid-turn: the sweep tells its customer, soon.)
            on_queued(session)
    return session


def started_note(*, who: str, reason: str, by: str) -> str:
    because = f" ({reason})" if reason else ""
    return (
        f"{HANDOFF_STARTED} {by} asked for a person{because}. From here {who} answers this "
        "chat and the agent stays silent, until a person hands the chat back."
    )


def handoff_claim(*, session_id: str, staff: Any, via: str = "console") -> Session:
    """A staff member of the chat's group takes it from the queue (queued -> person).
    Several at once: exactly one wins; the others get `HandoffConflict` naming them."""
    with transaction.atomic():
        session, record, before = _transition(
            session_id,
            HandoffRecord.Kind.CLAIMED,
            actor=Actor(user=staff),
            via=via,
            answerer_person=staff,
            answerer_turn_id=None,
        )
        queued_since = before.since
        waited = (timezone.now() - queued_since).total_seconds() if queued_since else 0.0
        _count(metrics.handoff_claimed, session, waited=waited)
        return _joined(session, record, staff)


def handoff_take_over(
    *, session_id: str, staff: Any, reason: Any = "", group: str = "", via: str = "console"
) -> Session:
    """A staff member takes the chat from the agent, or from the queue, at once (agent or
    queued -> person). A turn running meanwhile stores nothing more (`agent_answers_fence`)."""
    reason = _checked_text(reason, "reason", required=False, max_length=MAX_REASON)
    with transaction.atomic():
        session, record, _ = _transition(
            session_id,
            HandoffRecord.Kind.TAKEN_OVER,
            actor=Actor(user=staff),
            via=via,
            reason=reason,
            answerer_person=staff,
            answerer_group=lambda row: (
                row.answerer_group or checked_group(group) or agent_handoff_group(row.agent_name)
            ),
            answerer_turn_id=None,
            # From the agent, a note starts the stretch; from the queue, it has started.
            handoff_from_seq=lambda row: (
                _after_the_note(row) if row.answerer == Answerer.AGENT else row.handoff_from_seq
            ),
        )
        if record.from_state == Answerer.AGENT:
            _count(metrics.handoff_requested, session, via="console")
            label = person_label(staff, record.group)
            _note_then_stretch(session, started_note(who=label, reason=reason, by=label))
        return _joined(session, record, staff)


def _joined(session: Session, record: HandoffRecord, staff: Any) -> Session:
    words = f"{person_label(staff, record.group)} joined the chat."
    _note(session, f"{HANDOFF_STARTED} {words} A person answers from here.")
    _announce(session, record, words)
    return session


def _held_by(session_id: str, staff: Any) -> Q:
    """The condition of what only the chat's person may do (a superuser too)."""
    if getattr(staff, "is_superuser", False):
        return Q()
    return Q(answerer_person_id=staff.pk)


def handoff_hand_back(
    *, session_id: str, staff: Any, summary: Any = "", via: str = "console"
) -> Session:
    """The person gives the chat back to the agent (person -> agent), with a note that ends
    the human stretch in the model's context: who handled which messages, their summary."""
    summary = _checked_text(summary, "summary", required=False, max_length=MAX_TEXT)
    with transaction.atomic():
        session, record, _ = _transition(
            session_id,
            HandoffRecord.Kind.HANDED_BACK,
            extra=_held_by(session_id, staff),
            actor=Actor(user=staff),
            via=via,
            text=summary,
            answerer_person=None,
            answerer_group="",
            answerer_turn_id=None,
            handoff_from_seq=None,
        )
        who = person_label(staff, record.group)
        _note(
            session,
            ended_note(
                who=who, from_seq=record.from_seq or 1, to_seq=record.to_seq or 0, summary=summary
            ),
        )
        _announce(session, record, f"{who} handed the chat back to the agent.")
        _count(metrics.handoff_handed_back, session)
    return session


def ended_note(*, who: str, from_seq: int, to_seq: int, summary: str) -> str:
    said = f" Their summary: {summary}" if summary else ""
    return (
        f"{HANDOFF_ENDED} A person, {who}, handled messages {from_seq} to {to_seq} of this "
        f"chat.{said} The human stretch is over: the agent answers again from the next "
        "message, and anything said before about a person answering no longer holds."
    )


def handoff_close(
    *, session_id: str, staff: Any, reason: Any = "", via: str = "console"
) -> Session:
    """End the chat (queued or person -> closed): nobody answers; the customer's messages
    are still kept. The person who holds it closes it, or its group's staff while queued."""
    reason = _checked_text(reason, "reason", required=False, max_length=MAX_REASON)
    with transaction.atomic():
        held = _held_by(session_id, staff)
        session, record, _ = _transition(
            session_id,
            HandoffRecord.Kind.CLOSED,
            extra=Q(answerer=Answerer.QUEUED) | (Q(answerer=Answerer.PERSON) & held),
            actor=Actor(user=staff),
            via=via,
            reason=reason,
            answerer_turn_id=None,
        )
        _note(session, f"{HANDOFF_ENDED} {person_name(staff)} closed the chat.")
        _announce(session, record, f"{person_name(staff)} closed the chat.")
    return session


# -- what is said while a person answers -------------------------------------------------------


def staff_reply(*, session_id: str, staff: Any, text: Any) -> Appended:
    """The person's message to the customer: an assistant message, as Glove's clients render
    any, with its author in the message's extra data. Only the person who holds the chat."""
    text = _checked_text(text, "text", required=True, max_length=MAX_TEXT)
    with transaction.atomic():
        session = (
            Session.objects.select_for_update()
            .filter(pk=session_id, answerer=Answerer.PERSON)
            .filter(_held_by(session_id, staff))
            .values_list("answerer_group", flat=True)
            .first()
        )
        if session is None:
            raise _conflict(session_id, "reply")
        author = {
            "kind": "person",
            "name": person_name(staff),
            "username": staff.get_username(),
            "group": session or None,
            "label": person_label(staff, session),
        }
        message = CoreMessage(sender="agent", text=text, extra={AUTHOR_KEY: author})
        return messages_append(session_id=session_id, messages=[message])[0]


def staff_note(*, session_id: str, staff: Any, text: Any) -> HandoffRecord:
    """An internal note on the chat: kept in the audit, never a message (so never in the
    customer's history or the model's context)."""
    text = _checked_text(text, "text", required=True, max_length=MAX_TEXT)
    with transaction.atomic():
        session = _current(session_id)
        record = _record(
            session_id,
            HandoffRecord.Kind.NOTE,
            from_state="",
            to_state="",
            actor=Actor(user=staff),
            via="console",
            group=session.answerer_group,
            text=text,
        )
        record_event(
            stream=handoffs_stream(session.answerer_group),
            type="handoff.note",
            payload={"session": session_id, "by": person_name(staff), "text": text},
        )
    return record


def customer_message(*, session_id: str, text: str) -> Appended:
    """A customer's message while a person (or the queue) answers: stored and announced on
    the chat's stream (the person's console reads it live); no turn, no model call."""
    with transaction.atomic():
        appended = messages_append(
            session_id=session_id, messages=[CoreMessage(sender="user", text=text)]
        )[0]
        group = Session.objects.values_list("answerer_group", flat=True).get(pk=session_id)
        record_event(
            stream=handoffs_stream(group),
            type="handoff.message",
            payload={"session": session_id, "seq": appended.seq},
        )
    return appended


def kept_handoff_notes(session_id: str) -> list[str]:
    """The last hand-back notes of the chat, oldest first, rebuilt from the audit (one probe
    of its (session, id) index): a compaction summary carries them forward, so the end of a
    human stretch outlives the messages it summarises."""
    rows = list(
        HandoffRecord.objects.filter(session_id=session_id, kind=HandoffRecord.Kind.HANDED_BACK)
        .order_by("-id")
        .values_list("actor_label", "group", "from_seq", "to_seq", "text")[:KEPT_NOTES]
    )
    return [
        ended_note(
            who=f"{name} from the {group}" if group else name,
            from_seq=from_seq or 1,
            to_seq=to_seq or 0,
            summary=summary,
        )
        for name, group, from_seq, to_seq, summary in reversed(rows)
    ]


def handoff_note_words(text: str) -> str:
    """What the chat page says of a handoff note (the note itself is the agent's to read)."""
    if text.startswith(HANDOFF_ENDED):
        return "The agent answers again." if "handled messages" in text else "The chat was closed."
    joined = text.removeprefix(HANDOFF_STARTED).strip()
    if joined.endswith("A person answers from here."):
        return joined.removesuffix("A person answers from here.").strip()
    return "A person was asked to answer this chat."


def group_exists(name: str) -> bool:
    return bool(name) and Group.objects.filter(name=name).exists()
