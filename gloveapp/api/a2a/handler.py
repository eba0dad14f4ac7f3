"""The A2A request handler of one agent: the SDK's `RequestHandler` over turns and sessions.

The SDK parses and answers both bindings (JSON-RPC and HTTP+JSON); each method here checks
who asks (the user the server found for the token, `CALLER`), reads or writes through
`gloveapp.api.a2a.tasks` on a database thread, and answers a task. A stream reads the task
again whenever the session's event log moves (this process's relay wakes it; a slow poll
covers a wake-up it missed) and sends what changed; it ends when the task ends or asks the
caller something (`input-required`), as A2A streams do. A push notification config is the
turn's completion webhook (`turns.webhooks`, kind `a2a`): pushed once, when the task ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
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
    TaskArtifactUpdateEvent,
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
    async def _sent(self, params: SendMessageRequest, context: ServerCallContext) -> tasks.Found:
        user = self._user(context)
        message = params.message
        if message.task_id:
            found = await run_db(tasks.answer_task, user, self.agent, message)
        else:
            found = await run_db(
                tasks.start_task, user, self.agent, message, token=context.state.get(TOKEN)
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
        found = await self._sent(params, context)
        async for event in self._follow(found, self._user(context)):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        user = self._user(context)
        found = await run_db(tasks.find_task, user, self.agent, params.id)
        if found.turn.status in ("done", "failed", "cancelled"):
            raise UnsupportedOperationError(message="The task has ended: read it with GetTask.")
        async for event in self._follow(found, user):
            yield event

    # -- following a task ------------------------------------------------------------------
    async def _settled(
        self, found: tasks.Found, user: Any, *, until: frozenset, seconds: float
    ) -> Task:
        """The task once its state is in `until`, or as it is when `seconds` ran out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        async with self._wakeups(found, user) as woken:
            while True:
                task = await run_db(lambda: tasks.task_of(tasks.reread(found), user))
                left = deadline - loop.time()
                if task.status.state in until or left <= 0:
                    return task
                await woken(min(left, POLL_SECONDS))

    async def _follow(self, found: tasks.Found, user: Any) -> AsyncGenerator[Any]:
        """The task, then each change of its status (the reply as an artifact before the
        last), until it ends or asks the caller something."""
        async with self._wakeups(found, user) as woken:
            task = await run_db(lambda: tasks.task_of(tasks.reread(found), user))
            yield task
            shown = task.status
            while task.status.state not in tasks.TERMINAL | tasks.INTERRUPTED:
                await woken(POLL_SECONDS)
                task = await run_db(lambda: tasks.task_of(tasks.reread(found), user))
                if (task.status.state, task.status.message) == (shown.state, shown.message):
                    continue
                shown = task.status
                if task.status.state == TaskState.TASK_STATE_COMPLETED:
                    for artifact in task.artifacts:
                        yield TaskArtifactUpdateEvent(
                            task_id=task.id,
                            context_id=task.context_id,
                            artifact=artifact,
                            last_chunk=True,
                        )
                yield TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status
                )

    @contextlib.asynccontextmanager
    async def _wakeups(self, found: tasks.Found, user: Any) -> Any:
        """`await woken(seconds)`: returns when the session's log has a new stored event, or
        after `seconds`."""
        feed = None
        with contextlib.suppress(Exception):  # no relay now: the poll still answers
            feed = await open_feed(stream=session_stream(found.session.pk), user_pk=user.pk)

        async def woken(seconds: float) -> None:
            if feed is None:
                await asyncio.sleep(seconds)
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + seconds
            while (left := deadline - loop.time()) > 0:
                try:
                    kind, _ = await asyncio.wait_for(feed.queue.get(), left)
                except (TimeoutError, TypeError, ValueError):
                    return  # the wait ran out, or the feed ended
                if kind == "stored":
                    while not feed.queue.empty():
                        feed.queue.get_nowait()
                    return

        try:
            yield woken
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
