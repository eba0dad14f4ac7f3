"""Turns read and written as A2A tasks: one home for the mapping, every call synchronous.

A task is a turn (its id is the turn's), a context is a session (its id is the session's key,
as its owner names it). The state a turn shows as:

| turn | A2A |
| --- | --- |
| queued | `submitted` |
| running, or parked on a person | `working` |
| a slot open for its owner's answer | `input-required`: the status message asks (the slot's question) and names the slot and its `answerSchema` in a data part |
| a slot open for staff's decision (an approval) | `working`, its status message saying so |
| done | `completed`, the reply as the `reply` artifact and the status message |
| failed / cancelled | `failed` / `canceled` |

A wait on staff stays `working`, not `auth-required`: in A2A, `auth-required` asks the *caller*
for credentials, and nothing the caller sends can decide an approval; the turn goes on by
itself once a staff member decides, as any long step of a working task does.

Another user's task or context reads exactly as one that does not exist (`TaskNotFoundError`),
and so does a task of another agent than the endpoint's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from django.db import transaction
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from rest_framework.exceptions import ValidationError

from gloveapp.agents.config import AgentNotStartable, default_agent_name, startable_agent
from gloveapp.api.a2a.streaming import REPLY_ARTIFACT, reply_artifact_id
from gloveapp.api.common.slot_data import agent_tools, answer_schema, check_answer
from gloveapp.api.common.token_webhooks import turn_webhook_url
from gloveapp.conversations import idempotency
from gloveapp.conversations.access import address_of, may_see, may_speak
from gloveapp.conversations.models import Session
from gloveapp.conversations.services import DuplicateSession, session_create
from gloveapp.core import input_rules
from gloveapp.core.approvals.policy import APPROVAL_RENDERER
from gloveapp.lib import paging
from gloveapp.turns import public as turns
from gloveapp.turns import selectors
from gloveapp.turns.lifecycle import turn_cancel
from gloveapp.turns.models import Turn, TurnSlot, TurnWebhook
from gloveapp.turns.slots import slot_answer, slot_public_id
from gloveapp.turns.submit import turn_withdraw
from gloveapp.turns.webhooks import turn_webhook_ask

TASKS_LISTED = "a2a.tasks"
TASKS_PAGE_DEFAULT = 50
TASKS_PAGE_MAX = 100
MAX_TEXT_CHARS = 20_000  # as the chat page's composer and the REST start
# The states after which a task changes no more, and those that wait on the caller.
TERMINAL = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
)
INTERRUPTED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED})
_BY_STATUS = {
    Turn.Status.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    Turn.Status.RUNNING: TaskState.TASK_STATE_WORKING,
    Turn.Status.WAITING: TaskState.TASK_STATE_WORKING,
    Turn.Status.DONE: TaskState.TASK_STATE_COMPLETED,
    Turn.Status.FAILED: TaskState.TASK_STATE_FAILED,
    Turn.Status.CANCELLED: TaskState.TASK_STATE_CANCELED,
}
# What ListTasks' `status` filter reads in the turns' own words.
_STATUSES_OF = {
    TaskState.TASK_STATE_SUBMITTED: [Turn.Status.QUEUED],
    TaskState.TASK_STATE_WORKING: [Turn.Status.RUNNING, Turn.Status.WAITING],
    TaskState.TASK_STATE_INPUT_REQUIRED: [Turn.Status.RUNNING, Turn.Status.WAITING],
    TaskState.TASK_STATE_COMPLETED: [Turn.Status.DONE],
    TaskState.TASK_STATE_FAILED: [Turn.Status.FAILED],
    TaskState.TASK_STATE_CANCELED: [Turn.Status.CANCELLED],
}


def agent_of(session: Session) -> str:
    return session.agent_name or default_agent_name()


@dataclass(frozen=True)
class Found:
    turn: Turn
    session: Session


def find_task(user: Any, agent: str, task_id: str) -> Found:
    """The turn `task_id` names, if `user` may see it and it is `agent`'s; else the one
    refusal for every other case."""
    text = task_id or ""
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise TaskNotFoundError()
    turn = Turn.objects.select_related("session").filter(pk=int(text)).first()
    if turn is None or not may_see(user, turn.session) or agent_of(turn.session) != agent:
        raise TaskNotFoundError()
    return Found(turn=turn, session=turn.session)


def _text_message(text: str, *, role: Any, message_id: str, context_id: str, task_id: str):
    return Message(
        message_id=message_id,
        role=role,
        parts=[Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )


def _prompt_parts(slot: TurnSlot, schema: Any) -> list[Part]:
    shown = slot.input if isinstance(slot.input, dict) else {}
    question = next(
        (shown[key] for key in ("question", "title", "message") if isinstance(shown.get(key), str)),
        f"{slot.tool_name or slot.renderer} asks for your answer.",
    )
    data = {
        "slotId": slot_public_id(slot.turn_id, slot.slot_id),
        "renderer": slot.renderer,
        "toolName": slot.tool_name,
        "input": slot.input,
        "answerSchema": schema,
    }
    return [Part(text=question), Part(data=ParseDict(data, Value()))]


def task_of(found: Found, user: Any, *, history_length: int | None = None) -> Task:
    """The turn as the A2A task its caller reads (see the module's table)."""
    turn, session = found.turn, found.session
    context_id = address_of(user, session)
    task_id = str(turn.pk)
    state = _BY_STATUS[turn.status]
    status_message: Message | None = None
    artifacts: list[Artifact] = []
    history = [
        _text_message(
            turn.text,
            role=Role.ROLE_USER,
            message_id=f"turn-{turn.pk}-user",
            context_id=context_id,
            task_id=task_id,
        )
    ]
    if state == TaskState.TASK_STATE_WORKING:
        prompts = selectors.open_prompts(turn)
        theirs = [slot for slot in prompts if slot.renderer != APPROVAL_RENDERER]
        if theirs:
            state = TaskState.TASK_STATE_INPUT_REQUIRED
            slot = theirs[0]
            schema = answer_schema(slot, agent_tools(session))  # type: ignore[arg-type]
            status_message = Message(
                message_id=f"turn-{turn.pk}-ask-{slot.slot_id}",
                role=Role.ROLE_AGENT,
                parts=_prompt_parts(slot, schema),
                context_id=context_id,
                task_id=task_id,
            )
        elif prompts:
            status_message = _text_message(
                "Waiting for a staff member's decision; the task goes on once they decide.",
                role=Role.ROLE_AGENT,
                message_id=f"turn-{turn.pk}-approval-{prompts[0].slot_id}",
                context_id=context_id,
                task_id=task_id,
            )
    elif state == TaskState.TASK_STATE_COMPLETED:
        reply = selectors.turn_reply(turn) or ""
        status_message = _text_message(
            reply,
            role=Role.ROLE_AGENT,
            message_id=f"turn-{turn.pk}-reply",
            context_id=context_id,
            task_id=task_id,
        )
        history.append(status_message)
        artifacts.append(
            Artifact(
                artifact_id=reply_artifact_id(task_id),
                name=REPLY_ARTIFACT,
                parts=[Part(text=reply)],
            )
        )
    elif state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED):
        status_message = _text_message(
            turn.error or ("The turn was stopped." if turn.status == "cancelled" else "failed"),
            role=Role.ROLE_AGENT,
            message_id=f"turn-{turn.pk}-end",
            context_id=context_id,
            task_id=task_id,
        )
    status = TaskStatus(state=state)
    if status_message is not None:
        status.message.CopyFrom(status_message)
    moment = turn.finished_at or turn.started_at or turn.created_at
    status.timestamp.FromDatetime(moment)
    if history_length is not None and history_length >= 0:
        history = history[len(history) - history_length :] if history_length else []
    return Task(
        id=task_id, context_id=context_id, status=status, artifacts=artifacts, history=history
    )


def reread(found: Found) -> Found:
    turn = Turn.objects.select_related("session").get(pk=found.turn.pk)
    return Found(turn=turn, session=turn.session)


# -- writes ----------------------------------------------------------------------------------
def _text_of(message: Message) -> str:
    return "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")


def _data_of(message: Message) -> Any:
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            return MessageToDict(part)["data"]
    return None


def _owned_context(user: Any, agent: str, context_id: str) -> Session:
    """The caller's session `context_id` names (created on first use, as the REST store's
    first write creates it), or a new one when the client names none."""
    if not context_id:
        return session_create(owner=user, agent_name=agent)
    if not input_rules.SESSION_ID_RE.fullmatch(context_id):
        raise InvalidParamsError(message="contextId: letters, digits and _ . : - (1-128).")
    session = Session.objects.filter(owner_id=user.pk, key=context_id).first()
    if session is None:
        try:
            return session_create(owner=user, agent_name=agent, session_id=context_id)
        except DuplicateSession:
            # Once used and deleted: a context of the past is not reopened.
            raise InvalidParamsError(message="contextId: no such conversation.") from None
    if agent_of(session) != agent:
        raise InvalidParamsError(message="contextId: no such conversation with this agent.")
    return session


def _checked_start(user: Any, agent: str, message: Message) -> tuple[str, str]:
    """The text and idempotency key of a message that starts a task, or the refusal."""
    try:
        startable_agent(agent, user)
    except AgentNotStartable:
        raise TaskNotFoundError() from None
    text = _text_of(message).strip()
    if not text:
        raise InvalidParamsError(message="message: send the text in a text part.")
    if len(text) > MAX_TEXT_CHARS or input_rules.unstorable_text_problem(text):
        raise InvalidParamsError(message="message: too long, or holds text that cannot be stored.")
    try:
        return text, idempotency.check_key(message.message_id)
    except idempotency.IdempotencyKeyInvalid as refused:
        raise InvalidParamsError(message=f"messageId: {refused}") from None


def message_context(user: Any, agent: str, message: Message) -> Session:
    """The session a message speaks in, before it is sent (a stream watches it from before
    its turn starts): its task's, or the context a new task starts in (created now, as
    `start_task` would)."""
    if message.task_id:
        return find_task(user, agent, message.task_id).session
    _checked_start(user, agent, message)
    with transaction.atomic():
        return _owned_context(user, agent, message.context_id)


def start_task(
    user: Any, agent: str, message: Message, *, token: Any = None, session: Session | None = None
) -> Found:
    """A new turn of the message's context (the caller's session, or `session` when
    `message_context` found it) with its text; a retried message (the same `messageId`)
    starts nothing new and names the first one's task. The token's default webhook
    (`create_api_token --webhook`) is told when it ends."""
    text, key = _checked_start(user, agent, message)
    try:
        with transaction.atomic():
            named = session or (
                _owned_context(user, agent, message.context_id) if message.context_id else None
            )

            def perform() -> dict[str, Any]:
                # A message naming no context starts one: only when it is not a resend.
                chat = named or _owned_context(user, agent, "")
                queued = turns.start_turn_sync(
                    session_id=chat.pk,
                    text=text,
                    user_id=user.pk,
                    source="a2a",
                    webhook_url=turn_webhook_url(None, token),
                )
                return {"turnId": queued.turn.pk}

            # A resend (the same messageId) names the first send's task, and starts nothing,
            # whether or not the client named a context: without one, the key's scope is the
            # agent (each send would otherwise start a new context, and a new turn in it).
            started, _ = idempotency.idempotent_write(
                user_id=user.pk,
                key=key,
                scope=(
                    f"a2a_send:{named.pk}"
                    if named is not None and message.context_id
                    else f"a2a_send:new:{agent}"
                ),
                fingerprint=idempotency.request_fingerprint(text),
                perform=perform,
            )
    except (turns.QueueFull, turns.TurnLimitReached) as refused:
        raise InvalidRequestError(message=str(refused)) from None
    except (idempotency.IdempotencyKeyReused, idempotency.IdempotentRequestInProgress) as why:
        raise InvalidRequestError(message=str(why)) from None
    except ValueError as refused:
        raise InvalidParamsError(message=str(refused)) from None
    turn = Turn.objects.select_related("session").get(pk=started["turnId"])
    return Found(turn=turn, session=turn.session)


def answer_task(user: Any, agent: str, message: Message) -> Found:
    """The message answers what its task asks (`input-required`): the slot named in its
    metadata's `slotId`, else the first one open; its data part is the answer (or, without
    one, its text)."""
    found = find_task(user, agent, message.task_id)
    if not may_speak(user, found.session):
        raise TaskNotFoundError()
    if message.context_id and message.context_id != address_of(user, found.session):
        raise InvalidParamsError(message="contextId: not this task's context.")
    theirs = [
        slot for slot in selectors.open_prompts(found.turn) if slot.renderer != APPROVAL_RENDERER
    ]
    wanted = MessageToDict(message.metadata).get("slotId") if message.HasField("metadata") else None
    if wanted is not None:
        theirs = [s for s in theirs if slot_public_id(s.turn_id, s.slot_id) == wanted]
    if not theirs:
        raise InvalidRequestError(message="This task asks nothing now: send a new message.")
    slot = theirs[0]
    value = _data_of(message)
    if value is None:
        value = _text_of(message).strip()
    schema = answer_schema(slot, agent_tools(found.session))  # type: ignore[arg-type]
    try:
        if slot.renderer != "permission_request":
            check_answer(value, schema)
        answered = slot_answer(
            session_id=found.session.pk,
            public_id=slot_public_id(slot.turn_id, slot.slot_id),
            value=value,
            by=user.get_username(),
            via="a2a",
        )
    except ValidationError as refused:
        raise InvalidParamsError(message=f"The answer does not fit: {refused.detail}") from None
    except ValueError as refused:
        raise InvalidParamsError(message=str(refused)) from None
    if not answered:
        raise InvalidRequestError(message="This prompt is no longer waiting for an answer.")
    return reread(found)


def cancel_task(user: Any, agent: str, task_id: str) -> Found:
    found = find_task(user, agent, task_id)
    if not may_speak(user, found.session):
        raise TaskNotFoundError()
    turn = found.turn
    if turn.status == Turn.Status.QUEUED:
        if turn_withdraw(session_id=turn.session_id, turn_id=turn.pk, user_id=user.pk):
            return reread(found)
        turn = Turn.objects.get(pk=turn.pk)
    if turn.status in selectors.FINISHED:
        raise TaskNotCancelableError()
    turn_cancel(session_id=turn.session_id, user_id=user.pk)
    return reread(found)


def tasks_page(
    user: Any,
    agent: str,
    *,
    context_id: str,
    state: int,
    page_size: int,
    page_token: str,
) -> tuple[list[Found], str]:
    """One page of the caller's tasks with `agent`, newest first (the caller's own
    conversations only, as every list of theirs); and the next page's token ("" on the
    last)."""
    try:
        cursor = paging.parse_cursor(page_token or None, listed=TASKS_LISTED, tie=int)
    except paging.PageParamError:
        raise InvalidParamsError(message="pageToken: not a token this list handed out.") from None
    if page_size < 0 or page_size > TASKS_PAGE_MAX:
        raise InvalidParamsError(message=f"pageSize: 1 to {TASKS_PAGE_MAX}.")
    limit = page_size or TASKS_PAGE_DEFAULT
    rows = Turn.objects.select_related("session").filter(session__owner_id=user.pk)
    names = [agent, ""] if agent == default_agent_name() else [agent]
    rows = rows.filter(session__agent_name__in=names)
    if context_id:
        rows = rows.filter(session__key=context_id)
    if state:
        rows = rows.filter(status__in=_STATUSES_OF.get(state, []))
    if cursor is not None:
        rows = rows.filter(pk__lt=cursor.tie)
    page = list(rows.order_by("-id")[: limit + 1])
    token = ""
    if len(page) > limit:
        page = page[:limit]
        token = paging.Cursor(at=page[-1].created_at, tie=page[-1].pk).encode(TASKS_LISTED)
    return [Found(turn=turn, session=turn.session) for turn in page], token


def new_message_id() -> str:
    return uuid.uuid4().hex


# -- push notifications ----------------------------------------------------------------------
def _config_of(row: TurnWebhook) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        id=row.config_id, task_id=str(row.turn_id), url=row.url, token=row.token
    )


def _spoken_task(user: Any, agent: str, task_id: str) -> Found:
    found = find_task(user, agent, task_id)
    if not may_speak(user, found.session):
        raise TaskNotFoundError()
    return found


def push_config_set(
    user: Any, agent: str, config: TaskPushNotificationConfig
) -> TaskPushNotificationConfig:
    """The task tells `config.url` when it asks its caller something and when it ends
    (A2A's push notifications, `turns.task_pushes`: the task, with the client's `token` in
    `X-A2A-Notification-Token`, signed as every webhook we send). One per task: a second
    replaces the first."""
    found = _spoken_task(user, agent, config.task_id)
    url = config.url
    if (
        not url.lower().startswith(("https://", "http://"))
        or len(url) > 2000
        or input_rules.unstorable_text_problem(url)
        or any(ch.isspace() for ch in url)
    ):
        raise InvalidParamsError(message="url: an http or https URL (2000 characters at most).")
    if len(config.token) > 500 or len(config.id) > 100:
        raise InvalidParamsError(message="token: 500 characters at most; id: 100.")
    row = turn_webhook_ask(
        turn=found.turn,
        url=url,
        kind=TurnWebhook.Kind.A2A,
        config_id=config.id or new_message_id(),
        token=config.token,
    )
    return _config_of(row)


def push_configs(user: Any, agent: str, task_id: str) -> list[TaskPushNotificationConfig]:
    found = _spoken_task(user, agent, task_id)
    rows = TurnWebhook.objects.filter(turn=found.turn, kind=TurnWebhook.Kind.A2A)
    return [_config_of(row) for row in rows]


def push_config_get(
    user: Any, agent: str, task_id: str, config_id: str
) -> TaskPushNotificationConfig:
    for config in push_configs(user, agent, task_id):
        if config.id == config_id:
            return config
    raise TaskNotFoundError()


def push_config_delete(user: Any, agent: str, task_id: str, config_id: str) -> None:
    found = _spoken_task(user, agent, task_id)
    TurnWebhook.objects.filter(
        turn=found.turn, kind=TurnWebhook.Kind.A2A, config_id=config_id
    ).exclude(status=TurnWebhook.Status.SENT).delete()
