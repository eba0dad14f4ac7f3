"""Every write to a conversation: sessions, messages, counters, tasks and permissions.

Each service validates first (a refused call changes nothing), runs in one
`transaction.atomic()`, and records its live event in that same transaction (the outbox).
Writes that need a session row create it on first use, as Glove's stores do, so a runtime
`DjangoStore("some-id")` works without a separate set-up step.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from gloveapp.conversations import serialization
from gloveapp.conversations.append import (
    Appended,
    Fence,
    FencedOff,
    append_to_existing,
    fence_holds,
)
from gloveapp.conversations.models import Permission, RetiredSessionKey, Session, Task
from gloveapp.core import input_rules
from gloveapp.core.store import apply_task_updates, permission_key
from gloveapp.core.types import PERMISSION_STATUSES, PermissionStatus, TokenUsage
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import Task as CoreTask
from gloveapp.lib.db.prepared import prepared_cursor, sql_datetime
from gloveapp.live.eventlog import record_event
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream


class SessionGone(LookupError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f'Session "{session_id}" was deleted; its id cannot be used again.')


class DuplicateSession(ValueError):
    """The caller already has (or had) a session with this id; another user's ids never
    raise it (see `session_create`)."""

    def __init__(self, session_id: str, *, owned: bool = True) -> None:
        self.session_id = session_id
        if owned:
            super().__init__(f'You already have, or had, a session with id "{session_id}".')
        else:  # the global namespace of sessions nobody owns
            super().__init__(f'A session with id "{session_id}" exists or existed.')


# Ids the server gives sessions nobody owns (a mesh agent's inbox is `mesh:<agent id>`,
# `mesh.services.mesh_session_id`): a user's session never takes one as its global id, or it
# would become that agent's inbox, readable by the user, once the agent first runs.
SERVER_ID_PREFIXES = ("mesh:",)


def new_session_id() -> str:
    return f"glove_{uuid.uuid4().hex}"


def check_session_id(session_id: Any) -> str:
    return input_rules.check_text(
        session_id, "session_id", allow_empty=False, max_length=input_rules.MAX_ID
    )


def session_payload(session: Session) -> dict[str, Any]:
    # The stream goes to the owner's pages: they know the session by its key.
    return {
        "session": {
            "id": session.key,
            "title": session.title,
            "agent_name": session.agent_name,
            "token_count": session.token_count,
            "turn_count": session.turn_count,
        }
    }


def _announce_session(session: Session) -> None:
    record_event(
        stream=session_stream(session.id), type="session.updated", payload=session_payload(session)
    )


# -- sessions -----------------------------------------------------------------------------


def session_create(
    *,
    owner: Any = None,
    agent_name: str = "",
    title: str = "",
    session_id: str | None = None,
) -> Session:
    """A new session; `session_id` is the id its owner asks for (their `key`).

    Ids are per owner. `DuplicateSession` only when `owner` has, or had (a deleted session),
    a session with that id. An id held or once used by anyone else is still granted: the
    session keeps it as its `key` and gets a fresh global `id`, so the answer is the same as
    for an id nobody has, and the old id's event stream is never inherited (`was_used`).
    Without an owner (the runtime, the mesh, staff tools) there is one namespace, the ids:
    a taken or used id is a `DuplicateSession`. An owner's id in `SERVER_ID_PREFIXES` always
    gets a fresh global id.
    """
    key = check_session_id(session_id) if session_id is not None else new_session_id()
    input_rules.check_text(title, "title", max_length=200)
    input_rules.check_text(agent_name, "agent_name", max_length=100)
    values = {"key": key, "owner": owner, "agent_name": agent_name, "title": title}
    with transaction.atomic():
        if owner is not None and _owner_had(owner, key):
            raise DuplicateSession(key)
        session_id = key
        if Session.objects.filter(pk=key).exists() or was_used(key):
            if owner is None:
                raise DuplicateSession(key, owned=False)
            session_id = new_session_id()
        elif owner is not None and key.startswith(SERVER_ID_PREFIXES):
            session_id = new_session_id()
        try:
            # Savepoint: a concurrent creator of the same id may commit between check and insert.
            with transaction.atomic():
                session = Session.objects.create(id=session_id, **values)
        except IntegrityError:
            if owner is None or _owner_had(owner, key):
                raise DuplicateSession(key, owned=owner is not None) from None
            # Someone else took the id in that moment: the same answer, under a fresh id.
            try:
                with transaction.atomic():
                    session = Session.objects.create(id=new_session_id(), **values)
            except IntegrityError:  # the owner's own concurrent create of this id won
                raise DuplicateSession(key) from None
        _announce_session(session)
    return session


def session_child(
    *, parent_id: str, call_id: str, agent_name: str, title: str = ""
) -> tuple[Session, bool]:
    """The subagent session of the tool call `call_id` in `parent_id`, created on the first
    call (same owner, linked to the parent); (session, created). A delegation retried after
    its worker stopped finds the child it had already started."""
    input_rules.check_text(call_id, "call_id", max_length=200)
    with transaction.atomic():
        parent = Session.objects.select_for_update().get(pk=parent_id)
        child = Session.objects.filter(parent=parent, parent_call_id=call_id).first()
        if child is not None:
            return child, False
        session_id = new_session_id()
        child = Session.objects.create(
            id=session_id,
            key=session_id,
            owner_id=parent.owner_id,
            agent_name=agent_name,
            title=title[:200],
            parent=parent,
            parent_call_id=call_id,
        )
        _announce_session(child)
    return child, True


def _owner_had(owner: Any, key: str) -> bool:
    return (
        Session.objects.filter(owner=owner, key=key).exists()
        or RetiredSessionKey.objects.filter(owner=owner, key=key).exists()
    )


def session_update(*, session: Session, title: str) -> Session:
    input_rules.check_text(title, "title", max_length=200)
    with transaction.atomic():
        session.title = title
        session.save(update_fields=["title", "updated_at"])
        _announce_session(session)
    return session


def session_delete(*, session: Session) -> None:
    """Delete a session and, with it, its subagents' sessions (the foreign key cascades):
    every one of their ids is retired and announced as deleted, not only the parent's."""
    with transaction.atomic():
        gone = [(session.id, session.key, session.owner_id)]
        level = [session.id]
        while level:  # subagents nest a few levels at most (GLOVE_SUBAGENT_MAX_DEPTH)
            children = list(
                Session.objects.filter(parent_id__in=level).values_list("id", "key", "owner_id")
            )
            gone += children
            level = [child_id for child_id, _, _ in children]
        session.delete()
        for session_id, key, owner_id in gone:
            if owner_id is not None:
                # Its owner cannot take the id again (`session_create`); nor can anyone
                # else reach its events, which stay on the stream of its global id.
                RetiredSessionKey.objects.get_or_create(owner_id=owner_id, key=key)
            # The event row has no foreign key, so it outlives the session it announces.
            record_event(
                stream=session_stream(session_id), type="session.deleted", payload={"id": key}
            )


def was_used(session_id: str) -> bool:
    """Whether this id ever named a session (its events outlive it).

    An id is never reused: a new owner of an old id could replay the previous owner's
    conversation from the event log, and a turn still running for a deleted session would
    bring it back without an owner.
    """
    return LiveEvent.objects.filter(stream=session_stream(session_id)).exists()


def lock_session(session_id: str) -> Session:
    """The session row, locked for this transaction, created if it does not exist yet.

    The lock serialises writers of one session (two concurrent turns) on PostgreSQL;
    SQLite's IMMEDIATE transactions already serialise every writer. A deleted session is
    not created again (`SessionGone`): whatever was still writing to it is refused.
    """
    session = Session.objects.select_for_update().filter(pk=session_id).first()
    if session is not None:
        return session
    if was_used(session_id):
        # Race: a concurrent writer may have created the session (and written its events)
        # after the read above; the row commits with those events, so read it once more.
        session = Session.objects.select_for_update().filter(pk=session_id).first()
        if session is not None:
            return session
        raise SessionGone(session_id)
    try:
        with transaction.atomic():  # savepoint: another writer may create it first
            session = Session.objects.create(id=session_id, key=session_id)
    except IntegrityError:
        return Session.objects.select_for_update().get(pk=session_id)
    _announce_session(session)
    return session


# -- messages -----------------------------------------------------------------------------


def messages_append(
    *,
    session_id: str,
    messages: list[CoreMessage],
    owned_by: tuple[Any, str] | None = None,
    fence: Fence | None = None,
    agent_version_id: int | None = None,
) -> list[Appended]:
    """Append in order, all or nothing; `seq` continues the session's history; each
    message names `agent_version_id` (a turn's: the agent version it runs on).

    With `owned_by` (owner id, key), only to that owner's session of that key, checked by
    the append itself: `SessionGone` (nothing written) when the row is missing or not that
    (a caller that remembered the global id of a session deleted since). With `fence` (a
    turn's writes), only while it holds, checked by the append itself: `FencedOff`
    (nothing written) when it does not."""
    check_session_id(session_id)
    if not isinstance(messages, list):
        raise ValueError("messages must be a list")
    fields = _versioned(
        [serialization.message_fields(message, index) for index, message in enumerate(messages)],
        agent_version_id,
    )
    if not fields:
        return []
    # The common case, a session that exists, is one statement (see `append`); only a
    # first write creates the row, under the full locking path.
    append = partial(
        append_to_existing,
        session_id=session_id,
        fields=fields,
        on_titled=partial(_announce_title, session_id),
        owned_by=owned_by,
        fence=fence,
    )
    rows = append()
    if rows is not None:
        return rows
    if fence is not None:
        # A turn's session exists while the turn does: the fence refused it.
        raise FencedOff(session_id)
    if owned_by is not None:
        raise SessionGone(session_id)  # never create a row someone named by a remembered id
    with transaction.atomic():
        lock_session(session_id)  # creates it, or raises SessionGone
        rows = append()
    if rows is None:  # cannot happen under the lock; never report an append that was not made
        raise SessionGone(session_id)
    return rows


def _versioned(fields: list[dict[str, Any]], agent_version_id: int | None) -> list[dict[str, Any]]:
    if agent_version_id is not None:
        for values in fields:
            values["agent_version_id"] = int(agent_version_id)
    return fields


def _announce_title(session_id: str) -> None:
    """The append named an untitled chat after its first person message: tell the pages."""
    with transaction.atomic():
        session = Session.objects.filter(pk=session_id).first()
        if session is not None:
            _announce_session(session)


# -- counters -----------------------------------------------------------------------------


def _check_tokens(value: Any, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer")
    if value < 0 or value > input_rules.MAX_TOKENS_PER_CALL:
        raise ValueError(f"{field} must be between 0 and {input_rules.MAX_TOKENS_PER_CALL}")
    return value


def _checked_usage(usage: Any) -> tuple[int, int, int, int]:
    if not isinstance(usage, TokenUsage):
        raise ValueError("usage must be a TokenUsage")
    return (
        _check_tokens(usage.tokens_in, "tokens_in"),
        _check_tokens(usage.tokens_out, "tokens_out"),
        _check_tokens(usage.cache_creation_input_tokens, "cache_creation_input_tokens"),
        _check_tokens(usage.cache_read_input_tokens, "cache_read_input_tokens"),
    )


def _add_usage(session: Session, usage: tuple[int, int, int, int]) -> list[str]:
    """Add checked usage to the locked row; returns the fields to save."""
    tokens_in, tokens_out, cache_creation, cache_read = usage
    session.token_count += tokens_in + tokens_out
    session.tokens_in_total += tokens_in
    session.tokens_out_total += tokens_out
    session.cache_creation_input_tokens_total += cache_creation
    session.cache_read_input_tokens_total += cache_read
    return [
        "token_count",
        "tokens_in_total",
        "tokens_out_total",
        "cache_creation_input_tokens_total",
        "cache_read_input_tokens_total",
        "updated_at",
    ]


def tokens_add(*, session_id: str, usage: TokenUsage) -> Session:
    """Add one model call's usage: the running sum (reset by compaction) and the totals."""
    check_session_id(session_id)
    checked = _checked_usage(usage)
    with transaction.atomic():
        session = lock_session(session_id)
        session.save(update_fields=_add_usage(session, checked))
        _announce_session(session)
    return session


def turn_record(
    *,
    session_id: str,
    messages: list[CoreMessage],
    usage: TokenUsage,
    fence: Fence | None = None,
    agent_version_id: int | None = None,
) -> Session:
    """A model reply's writes in one transaction: its messages, its token usage, one turn.

    The same rules as `messages_append`, `tokens_add` and `turn_increment` called in turn
    (everything is validated before anything is written), but one commit instead of three
    and one `session.updated` event for the counters. With `fence`, nothing is written
    unless it holds (`FencedOff`), as in `messages_append`.
    """
    check_session_id(session_id)
    checked = _checked_usage(usage)
    if not isinstance(messages, list):
        raise ValueError("messages must be a list")
    fields = _versioned(
        [serialization.message_fields(message, index) for index, message in enumerate(messages)],
        agent_version_id,
    )
    if fields and connection.vendor == "postgresql" and not connection.in_atomic_block:
        # One statement: one round trip and its own commit (`append`).
        counted: dict[str, Any] = {}
        rows = append_to_existing(
            session_id=session_id,
            fields=fields,
            on_titled=partial(_announce_title, session_id),
            usage=checked,
            counted=counted,
            fence=fence,
        )
        if rows is not None:
            return Session(id=session_id, **counted)
        if fence is not None:
            raise FencedOff(session_id)
    with transaction.atomic():
        if fence is not None and not fence_holds(fence):
            raise FencedOff(session_id)
        if fields and append_to_existing(session_id=session_id, fields=fields) is None:
            lock_session(session_id)  # creates it, or raises SessionGone
            append_to_existing(session_id=session_id, fields=fields)
        session = _count_turn(session_id, checked)
        if session is None:  # no message created the row: the locking path creates it
            lock_session(session_id)
            session = _count_turn(session_id, checked)
        _announce_session(session)
    return session


_COUNT_TURN_SQL = f"""
    UPDATE {Session._meta.db_table}
       SET token_count = token_count + %s, tokens_in_total = tokens_in_total + %s,
           tokens_out_total = tokens_out_total + %s,
           cache_creation_input_tokens_total = cache_creation_input_tokens_total + %s,
           cache_read_input_tokens_total = cache_read_input_tokens_total + %s,
           turn_count = turn_count + 1, updated_at = %s
     WHERE id = %s
    RETURNING "key", title, agent_name, token_count, turn_count
"""


def _count_turn(session_id: str, usage: tuple[int, int, int, int]) -> Session | None:
    """One turn and its usage added by one statement (the row lock it takes is the one
    `lock_session` would); the session as the event announces it, None if it is missing."""
    tokens_in, tokens_out, cache_creation, cache_read = usage
    with prepared_cursor() as cursor:
        cursor.execute(
            _COUNT_TURN_SQL,
            [
                tokens_in + tokens_out,
                tokens_in,
                tokens_out,
                cache_creation,
                cache_read,
                sql_datetime(timezone.now()),
                session_id,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    key, title, agent_name, token_count, turn_count = row
    return Session(
        id=session_id,
        key=key,
        title=title,
        agent_name=agent_name,
        token_count=token_count,
        turn_count=turn_count,
    )


def turn_increment(*, session_id: str) -> Session:
    check_session_id(session_id)
    with transaction.atomic():
        session = lock_session(session_id)
        session.turn_count += 1
        session.save(update_fields=["turn_count", "updated_at"])
        _announce_session(session)
    return session


def counters_reset(*, session_id: str) -> Session:
    """Zero the token and turn counters (compaction); never touches messages or totals."""
    check_session_id(session_id)
    with transaction.atomic():
        session = lock_session(session_id)
        session.token_count = 0
        session.turn_count = 0
        session.save(update_fields=["token_count", "turn_count", "updated_at"])
        _announce_session(session)
    return session


# -- tasks --------------------------------------------------------------------------------


def _announce_tasks(session_id: str) -> None:
    tasks = Task.objects.filter(session_id=session_id).order_by("position", "pk")
    record_event(
        stream=session_stream(session_id),
        type="tasks.replaced",
        payload={"tasks": [serialization.task_to_core(task).to_dict() for task in tasks]},
    )


def tasks_replace(*, session_id: str, tasks: list[CoreTask]) -> None:
    """Replace the whole list, as every Glove store does."""
    check_session_id(session_id)
    if not isinstance(tasks, list):
        raise ValueError("tasks must be a list")
    fields = [serialization.task_fields(task, index) for index, task in enumerate(tasks)]
    input_rules.check_unique_task_ids([values["task_id"] for values in fields])
    with transaction.atomic():
        lock_session(session_id)
        Task.objects.filter(session_id=session_id).delete()
        Task.objects.bulk_create(
            [
                Task(session_id=session_id, position=position, **values)
                for position, values in enumerate(fields)
            ]
        )
        _announce_tasks(session_id)


def task_update(*, session_id: str, task_id: str, updates: dict[str, Any]) -> None:
    """Update status/content/activeForm of one task; an unknown id is a silent no-op."""
    check_session_id(session_id)
    if not isinstance(updates, dict):
        raise ValueError("updates must be an object")
    # Validate the fields before touching the database, even for an unknown task.
    probe = CoreTask(id="", content="", active_form="")
    apply_task_updates(probe, updates)
    for name, value in (("content", probe.content), ("activeForm", probe.active_form)):
        input_rules.check_text(value, name)
    with transaction.atomic():
        lock_session(session_id)
        row = Task.objects.filter(session_id=session_id, task_id=task_id).first()
        if row is None:
            return
        task = serialization.task_to_core(row)
        apply_task_updates(task, updates)
        row.status, row.content, row.active_form = task.status, task.content, task.active_form
        row.save(update_fields=["status", "content", "active_form"])
        _announce_tasks(session_id)


# -- permissions --------------------------------------------------------------------------


def permission_set(
    *, session_id: str, tool_name: str, status: PermissionStatus, tool_input: Any = None
) -> Permission:
    check_session_id(session_id)
    input_rules.check_text(tool_name, "tool_name", allow_empty=False, max_length=200)
    if status not in PERMISSION_STATUSES:
        raise ValueError(f"status must be one of {', '.join(PERMISSION_STATUSES)}, got {status!r}")
    key = input_rules.check_text(permission_key(tool_name, tool_input), "tool_input")
    with transaction.atomic():
        lock_session(session_id)
        permission, _ = Permission.objects.update_or_create(
            session_id=session_id, key=key, defaults={"tool_name": tool_name, "status": status}
        )
        # The chat page lists remembered answers, with a reset.
        record_event(stream=session_stream(session_id), type="permissions.changed", payload={})
    return permission


def permissions_reset(
    *, session_id: str, permission_id: int | None = None, key: str | None = None
) -> int:
    """Forget the chat's remembered permission answers (one of them, by row or by
    `permission_key`, or all): the next call of the tool asks again. Returns how many were
    forgotten."""
    check_session_id(session_id)
    with transaction.atomic():
        rows = Permission.objects.filter(session_id=session_id)
        if permission_id is not None:
            rows = rows.filter(pk=permission_id)
        if key is not None:
            rows = rows.filter(key=key)
        forgotten, _ = rows.delete()
        if forgotten:
            record_event(stream=session_stream(session_id), type="permissions.changed", payload={})
    return forgotten
