"""What the chat pages show, read from the database through the apps' selectors: plain
functions the views call. The history's timeline is `gloveapp.conversations.timeline`."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from gloveapp.agents.labels import (
    agent_title,
    inbox_kind_label,
    is_mesh_tag,
    peer_name,
    tool_label,
    tool_labels,
)
from gloveapp.approvals.selectors import awaited_by_slot, session_edits
from gloveapp.conversations import handoff
from gloveapp.conversations import selectors as conversation_selectors
from gloveapp.conversations.access import address_of, may_speak
from gloveapp.conversations.models import Session
from gloveapp.conversations.timeline import timeline
from gloveapp.live.replay import current_cursor
from gloveapp.live.streams import session_stream
from gloveapp.turns import selectors as turn_selectors
from gloveapp.turns.permissions import PERMISSION_CHOICES, REMEMBERED_PERMISSION_LABELS
from gloveapp.turns.timeline import session_timelines
from inbox import selectors as inbox_selectors
from inbox.models import InboxItem
from mesh.core.inbound import WAITING_PREFIX

# The partials a page can ask for by their element id (htmx sends it as HX-Target).
STAFF_TIMELINE_TURNS = 3
PARTIALS = ("messages", "tasks", "inbox", "slots", "turn-status", "permissions", "handoff")


@dataclass(slots=True)
class InboxCard:
    """One card of the chat's inbox sidebar, in words a customer reads: a mesh item names
    the agent and never shows its tag or message ids; a reply that resolved a waiting item
    is one card, not two."""

    key: str
    title: str
    text: str
    created_at: Any
    mesh: bool = False
    blocking: bool = False


_REPLYING_TO = re.compile(r"\(replying to (?P<id>[^)]+)\)\s*$")


def _card(item: InboxItem, *, answered_wait: bool = False) -> InboxCard:
    """The card in a customer's words: its kind's label (`labels.inbox_kind_label`) for a
    title, the answer once there is one, else what was asked."""
    tag, request, response = item.tag, item.request, item.response
    pending = item.status == InboxItem.Status.PENDING
    card = InboxCard(
        key=item.key,
        title=inbox_kind_label(tag, request, answered=not pending),
        text="",
        created_at=item.created_at,
        blocking=item.blocking,
        mesh=is_mesh_tag(tag),
    )
    if not card.mesh:
        card.text = response if not pending and response else request
    elif tag.startswith(WAITING_PREFIX) and pending:
        broadcast = request.startswith("Broadcast ")
        card.title = "Broadcast sent, waiting for an answer" if broadcast else card.title
        card.text = "" if broadcast else f"Asked {peer_name(request)}; the answer shows here."
    else:
        if answered_wait and tag.startswith("mesh:from:"):
            card.title = f"{peer_name(request)} answered"
        card.text = response or ""
    return card


def inbox_cards(session_id: str) -> dict[str, list[InboxCard]]:
    """The sidebar: "Watching" (pending), "Resolved" (waiting for the agent) and delivered.

    A mesh reply arrives twice in the store (the reply, and the `mesh:waiting:<id>` item it
    resolves, with the same text): the page shows the reply's card alone."""
    by_state = inbox_selectors.inbox_items_by_state(session_id)
    items = sorted(
        [item for group in by_state.values() for item in group],
        key=lambda item: (item.created_at, item.key),
    )
    waits = {
        item.tag[len(WAITING_PREFIX) :]: item
        for item in items
        if item.tag.startswith(WAITING_PREFIX)
    }
    folded: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if not item.tag.startswith("mesh:from:"):
            continue
        match = _REPLYING_TO.search(item.request)
        wait = waits.get(match["id"]) if match else None
        if wait is not None and wait.status != InboxItem.Status.PENDING:
            folded.add(wait.key)
            answered.add(item.key)
    groups: dict[str, list[InboxCard]] = {"watching": [], "resolved": [], "delivered": []}
    for item in items:
        if item.key in folded:
            continue
        card = _card(item, answered_wait=item.key in answered)
        if item.status == InboxItem.Status.PENDING:
            groups["watching"].append(card)
        elif item.status == InboxItem.Status.RESOLVED:
            groups["resolved"].append(card)
        else:
            groups["delivered"].append(card)
    return groups


class NamedWait:
    """A slot as the page shows it, with its wait in words for staff (`awaited`) and the
    customer (`awaited_customer`); every other attribute is the slot's."""

    def __init__(self, slot: Any, awaited: str, awaited_customer: str) -> None:
        self.slot, self.awaited, self.awaited_customer = slot, awaited, awaited_customer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.slot, name)


def _named_waits(slots: list[Any], session: Session) -> list[Any]:
    """Each slot with the wait it is, in words, as staff read it (`slot.awaited`): "Waiting
    for a barista to approve the checkout", "Waiting for the customer to answer the
    checkout"; and the newest wait as the turn's status (`waiting_for`)."""
    if not slots:
        return slots
    approvals = awaited_by_slot(session.pk)
    labels = tool_labels(session.agent_name)
    named = []
    for slot in slots:
        what = tool_label(session.agent_name, slot.tool_name or slot.renderer, labels).lower()
        if slot.id in approvals:
            who, label = approvals[slot.id]
            what = (label or what).lower()
            waits = (
                f"Waiting for {who} to approve the {what}",
                f"Waiting for a staff member to approve your {what}",
            )
        elif slot.renderer == "permission_request":
            waits = (
                f"Waiting for the customer to allow the {what}",
                f"Waiting for you to allow the {what}",
            )
        else:
            waits = (
                f"Waiting for the customer to answer the {what}",
                f"Waiting for your answer to the {what}",
            )
        named.append(NamedWait(slot, *waits))
    return named


def _labelled(permissions: list[Any], agent_name: str) -> list[Any]:
    """The remembered answers, each with its tool's label (a customer reads no tool name)."""
    if permissions:
        labels = tool_labels(agent_name)
        for permission in permissions:
            permission.label = tool_label(agent_name, permission.tool_name, labels)
    return permissions


def _with_edits(entries: list[Any], session_id: str) -> list[Any]:
    """The customer reads what staff changed in a call before it ran, under its card (the
    edits of the calls these entries show, never the whole chat's)."""
    edits = session_edits(
        session_id, (tool.call_id or "" for entry in entries for tool in entry.tools)
    )
    if edits:
        for entry in entries:
            for tool in entry.tools:
                tool.changes = edits.get(tool.call_id or "", [])
    return entries


# Messages per page of a chat's history: the page opens at the newest, earlier ones load
# on scroll (`history_context`).
HISTORY_PAGE = 50
# A refresh re-renders what the page shows from its oldest message on (so the earlier pages
# a reader loaded stay), up to this many messages; past it, the newest page again.
HISTORY_WIDEST = 400


def _entries(
    session: Session, window: conversation_selectors.HistoryWindow, *, newest: bool
) -> list[Any]:
    """The window's timeline with the turn notes that fall in it: a note stands after its
    turn's last message (`end_seq`), so a page takes those from its first message to its
    last (the newest page, every later one too)."""
    notes = turn_selectors.ended_turn_notes(
        session.pk,
        from_seq=window.first_seq if window.has_earlier else None,
        to_seq=None if newest else window.last_seq,
    )
    return _with_edits(
        timeline(session, window.messages, notes, from_start=not window.has_earlier), session.pk
    )


def console_entries(session: Session) -> list[Any]:
    """The chat's newest page of history as the staff console shows it beside the actions:
    the chat page's timeline (the agent's part, its tool calls, the handoff notes)."""
    window = conversation_selectors.history_window(session.pk, limit=HISTORY_PAGE)
    return _entries(session, window, newest=True)


def chat_context(
    session: Session, *, user: Any, before: int | None = None, start: int | None = None
) -> dict[str, Any]:
    """Everything the chat page renders: its newest page of history (`HISTORY_PAGE`
    messages), or the page older than `before` (the page without JavaScript), or, for a
    refresh of a page that shows everything from `start` on, that again (`HISTORY_WIDEST`)."""
    # Read the event id first: an event that lands while the page is being read is then
    # replayed by the socket (a refresh too many), never lost (a refresh too few).
    last_event_id = current_cursor(session_stream(session.pk))
    window = conversation_selectors.history_window(
        session.pk, limit=HISTORY_PAGE, before=before, start=start, widest=HISTORY_WIDEST
    )
    newest = before is None
    return {
        "session": session,
        "agent_title": agent_title(session.agent_name),
        # The id the page's URLs name the session by: its owner's own, staff's the global one.
        "session_ref": address_of(user, session),
        "can_speak": may_speak(user, session),
        # Who answers the chat (the agent, a queue, a person) and whether the reader is staff
        # (who read a handoff note's text for the agent, and open the chat on the console).
        "answerer": handoff.answerer_of(session),
        "staff_view": bool(getattr(user, "is_staff", False)),
        # The composer's key for its next message: a resent form (a retry, a double submit,
        # the browser's resubmit) stores the message once (composer.js renews it per send).
        "composer_key": uuid.uuid4().hex,
        "last_event_id": last_event_id,
        "entries": _entries(session, window, newest=newest),
        "has_earlier": window.has_earlier,
        "first_seq": window.first_seq,
        # An older page (`?before=`, without JavaScript): it links back to the newest.
        "older_page": not newest,
        # What waits behind the running turn, from the database: a reload shows the same.
        # One bubble per message: a started turn's message is in the history already.
        "queue": [
            queued
            for queued in turn_selectors.live_turns(session.pk)
            if queued.status == "queued"
            or queued.base_seq is None
            or session.last_seq <= queued.base_seq
        ],
        "permissions": _labelled(
            conversation_selectors.remembered_permissions(session.pk), session.agent_name
        ),
        "permission_labels": REMEMBERED_PERMISSION_LABELS,
        "permission_choices": PERMISSION_CHOICES,
        # The history's version: live.js never swaps in a partial older than the one shown.
        "last_seq": window.last_seq if newest else session.last_seq,
        "tasks": conversation_selectors.session_tasks(session.pk),
        "inbox": inbox_cards(session.pk),
        "slots": _named_waits(turn_selectors.visible_slots(session.pk), session),
        "busy": turn_selectors.is_busy(session.pk),
        "turn": turn_selectors.newest_turn(session.pk),
        "parent_ref": address_of(user, session.parent) if session.parent_id else None,
        # Staff read the newest turns' timelines beside the chat.
        "timelines": session_timelines(session.pk, limit=STAFF_TIMELINE_TURNS)
        if getattr(user, "is_staff", False)
        else None,
    }


def history_context(session: Session, *, user: Any, before: int) -> dict[str, Any]:
    """One page of history older than `before`, as the chat page's "earlier" loader swaps
    it in above what it shows."""
    window = conversation_selectors.history_window(session.pk, limit=HISTORY_PAGE, before=before)
    return {
        "session": session,
        "session_ref": address_of(user, session),
        "entries": _entries(session, window, newest=False),
        "has_earlier": window.has_earlier,
        "first_seq": window.first_seq,
    }
