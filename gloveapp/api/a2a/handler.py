"""The A2A request handler of one agent: the SDK's `RequestHandler` over turns and sessions.

The SDK parses and answers both bindings (JSON-RPC and HTTP+JSON); each method here checks
who asks (the user the server found for the token, `CALLER`), reads or writes through
`gloveapp.api.a2a.tasks` on a database thread, and answers a task. A stream watches the
session's stream from before its message is sent (`gloveapp.api.a2a.streaming`): it sends
the reply's text as the model writes it (chunks of the `reply` artifact), reads the task
again whenever the session's event log moves (this process's relay wakes it; a slow poll
covers a wake-up it missed) and sends what changed; it ends when the task ends or asks the
caller something (`input-required`), as A2A streams do. A push notification config is the
address on the turn's completion webhook row (`turns.webhooks`, kind `a2a`); its pushes, one
per change (input-required, the end), are `turns.task_pushes`'.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    UnsupportedOperationError,
)
from django.conf import settings

from gloveapp.api.a2a import tasks
from gloveapp.api.a2a.streaming import ReplyChunks, Watch
from gloveapp.live.sse import open_feed, run_db
from gloveapp.live.streams import session_stream

CALLER = "glove.user"
TOKEN = "glove.token"
# A stream reads its task again at least this often, whether or not the log woke it.
POLL_SECONDS = 1.0


class GloveRequestHandler(RequestHandler):
    def __init__(self, agent: str) -> None:
        self.agent = agent

    @staticmethod
    def _user(context: ServerCallContext) -> Any:
        return context.state[CALLER]

    # -- tasks -----------------------------------------------------------------------------
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        user = self._user(context)
        length = params.history_length if params.HasField("history_length") else None

        def read() -> Task:
            return tasks.task_of(
                tasks.find_task(user, self.agent, params.id), user, history_length=length
            )

        return await run_db(read)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        user = self._user(context)
        length = params.history_length if params.HasField("history_length") else None

        def read() -> ListTasksResponse:
            found, token = tasks.tasks_page(
                user,
                self.agent,
                context_id=params.context_id,
                state=params.status,
                page_size=params.page_size if params.HasField("page_size") else 0,
                page_token=params.page_token,
            )
            rows = [tasks.task_of(one, user, history_length=length) for one in found]
            if params.status:
                rows = [row for row in rows if row.status.state == params.status]
            return ListTasksResponse(tasks=rows, next_page_token=token, page_size=len(rows))

        return await run_db(read)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        user = self._user(context)
        found = await run_db(tasks.cancel_task, user, self.agent, params.id)
        # A running turn stops on its worker: give it a moment to say so.
        task = await self._settled(found, user, until=tasks.TERMINAL, seconds=10)
        return task

    # -- messages --------------------------------------------------------------------------
    async def _sent(
        self, params: SendMessageRequest, context: ServerCallContext, *, session: Any = None
    ) -> tasks.Found:
        user = self._user(context)
        message = params.message
        if message.task_id:
            found = await run_db(tasks.answer_task, user, self.agent, message)
        else:
            found = await run_db(
                tasks.start_task,
                user,
                self.agent,
                message,
                token=context.state.get(TOKEN),
                session=session,
            )
        if params.configuration.HasField("task_push_notification_config"):
            config = TaskPushNotificationConfig()
            config.CopyFrom(params.configuration.task_push_notification_config)
            config.task_id = str(found.turn.pk)
            await run_db(tasks.push_config_set, user, self.agent, config)
        return found

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        found = await self._sent(params, context)
        user = self._user(context)
        if params.configuration.return_immediately:
            return await run_db(tasks.task_of, found, user)
        return await self._settled(
            found,
            user,
            until=tasks.TERMINAL | tasks.INTERRUPTED,
            seconds=settings.GLOVE_TURN_WAIT_MAX_SECONDS,
        )

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        user = self._user(context)
        # Watched before the turn starts: a worker may write the first words of the reply
        # before this stream would otherwise have joined the session's group.
        session = await run_db(tasks.message_context, user, self.agent, params.message)
        async with self._watch(session, user) as watch:
            found = await self._sent(params, context, session=session)
            watch.turn_id = found.turn.pk
            async for event in self._follow(found, user, watch):
                yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        user = self._user(context)
        found = await run_db(tasks.find_task, user, self.agent, params.id)
        if found.turn.status in ("done", "failed", "cancelled"):
            raise UnsupportedOperationError(message="The task has ended: read it with GetTask.")
        async with self._watch(found.session, user, turn_id=found.turn.pk) as watch:
            async for event in self._follow(found, user, watch):
                yield event

    # -- following a task ------------------------------------------------------------------
    async def _settled(
        self, found: tasks.Found, user: Any, *, until: frozenset, seconds: float
    ) -> Task:
        """The task once its state is in `until`, or as it is when `seconds` ran out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        async with self._watch(found.session, user, turn_id=found.turn.pk) as watch:
            while True:
                task = await run_db(lambda: tasks.task_of(tasks.reread(found), user))
                left = deadline - loop.time()
                if task.status.state in until or left <= 0:
                    return task
                await watch.stored(min(left, POLL_SECONDS))

    async def _follow(self, found: tasks.Found, user: Any, watch: Watch) -> AsyncGenerator[Any]:
        """The task, then the reply's text as it is written and each change of its status
        (the whole reply settled by the last chunk before `completed`), until it ends or
        asks the caller something."""
        loop = asyncio.get_running_loop()
        task = await run_db(lambda: tasks.task_of(tasks.reread(found), user))
        read_at = loop.time()
        yield task
        chunks = ReplyChunks(task_id=task.id, context_id=task.context_id)
        shown = task.status
        while task.status.state not in tasks.TERMINAL | tasks.INTERRUPTED:
            frames, stored = await watch.next(POLL_SECONDS - (loop.time() - read_at))
            for kind, payload in frames:
                if (chunk := chunks.on_frame(kind, payload)) is not None:
                    yield chunk
            if not stored and loop.time() - read_at < POLL_SECONDS:
                continue  # words only: the task is read again on its log's move, or the poll
            task = await run_db(lambda: tasks.task_of(tasks.reread(found), user))
            read_at = loop.time()
            if (task.status.state, task.status.message) == (shown.state, shown.message):
                continue
            shown = task.status
            if task.status.state == TaskState.TASK_STATE_COMPLETED:
                # The last words may have come in beside the end: sent before the last chunk.
                for kind, payload in watch.arrived()[0]:
                    if (chunk := chunks.on_frame(kind, payload)) is not None:
                        yield chunk
                for artifact in task.artifacts:
                    yield chunks.last(artifact)
            yield TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=task.status
            )

    @contextlib.asynccontextmanager
    async def _watch(
        self, session: Any, user: Any, *, turn_id: int | None = None
    ) -> AsyncIterator[Watch]:
        """The session's stream as one A2A stream reads it (`streaming.Watch`)."""
        feed = None
        with contextlib.suppress(Exception):  # no relay now: the poll still answers
            feed = await open_feed(stream=session_stream(session.pk), user_pk=user.pk)
        try:
            yield Watch(feed, turn_id=turn_id)
        finally:
            if feed is not None:
                feed.close()

    # -- push notifications and the extended card -------------------------------------------
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        return await run_db(tasks.push_config_set, self._user(context), self.agent, params)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        return await run_db(
            tasks.push_config_get, self._user(context), self.agent, params.task_id, params.id
        )

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        configs = await run_db(tasks.push_configs, self._user(context), self.agent, params.task_id)
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await run_db(
            tasks.push_config_delete, self._user(context), self.agent, params.task_id, params.id
        )

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()


__all__ = ["CALLER", "TOKEN", "GloveRequestHandler", "InvalidParamsError"]
