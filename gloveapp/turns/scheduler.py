"""The scheduler: the periodic work a turn worker does beside its turns, so no cron line is
needed: the approvals' deadlines and notifications and the inbox items' expiry every
GLOVE_APPROVAL_SWEEP_SECONDS, and the usage page's days (`turns.usage_rollup`) then retention
(`turns.retention`) every GLOVE_RETENTION_SECONDS, each on a thread of its own. The long
one, retention, stops between two batches when the worker stops
(`gloveapp.lib.db.batches.stopping_when`): a SIGTERM mid-prune ends it within a batch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings

from gloveapp.approvals.tasks import approval_deadlines
from gloveapp.conversations.handoff_bounds import queue_overdue_sweep
from gloveapp.lib.db.batches import Stopped, stopping_when
from gloveapp.lib.db.outages import Backoff, close_broken_connections
from gloveapp.turns.retention import retention_apply
from gloveapp.turns.spending import reservations_heal
from gloveapp.turns.task_pushes import turn_pushes_deliver
from gloveapp.turns.usage_rollup import usage_rollup
from gloveapp.turns.webhooks import turn_webhooks_deliver
from gloveapp.versions.promotion import publish_requests_settle
from gloveapp.versions.tasks import replay_runs_resume
from inbox.services import expire_inbox_items

logger = logging.getLogger(__name__)


class TurnScheduler:
    """The periodic work of one engine. `spawn` starts a task the engine cancels as it stops;
    `stopping` says it is stopping."""

    def __init__(
        self,
        *,
        stopping: Callable[[], bool],
        spawn: Callable[..., asyncio.Task[Any]],
    ) -> None:
        self._stopping = stopping
        self._spawn = spawn
        self._scheduler_thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="glove-turns-schedule"
        )
        # Retention on a thread of its own: a long round of deletes never delays the
        # approvals' deadlines.
        self._retention_thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="glove-turns-retention"
        )

    @property
    def threads(self) -> list[ThreadPoolExecutor]:
        """Its threads, whose connections the engine closes there as it stops."""
        return [self._scheduler_thread, self._retention_thread]

    async def schedule(self) -> None:
        """The scheduler: the approvals' periodic task (deadlines, then notifications) and
        the inbox items' expiry every GLOVE_APPROVAL_SWEEP_SECONDS, on a thread of its own
        so a slow SMTP server or webhook never holds up the watcher's heartbeats; and
        retention (`turns.retention`) every GLOVE_RETENTION_SECONDS on another. No cron
        line is needed."""
        if settings.GLOVE_RETENTION_SECONDS > 0:
            self._spawn(self._retain(), name="glove-turns:retention")
        loop = asyncio.get_running_loop()
        # The database away: one line, not a traceback per round; any other failure is
        # logged whole. It runs again either way.
        backoff = Backoff("the approvals' periodic task")
        while not self._stopping():
            try:
                await loop.run_in_executor(self._scheduler_thread, _run_scheduled)
            except Exception as error:
                backoff.failed(error)
            else:
                backoff.succeeded()
            await asyncio.sleep(settings.GLOVE_APPROVAL_SWEEP_SECONDS)

    async def _retain(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff("retention")
        while not self._stopping():
            try:
                await loop.run_in_executor(self._retention_thread, _run_retention, self._stopping)
            except Exception as error:
                backoff.failed(error)
            else:
                backoff.succeeded()
            await asyncio.sleep(settings.GLOVE_RETENTION_SECONDS)


def _run_scheduled() -> None:
    try:
        approval_deadlines.call()
        # Inbox items past their expires_at are answered "Expired: ..." (no cron line).
        expire_inbox_items()
        # Queued chats past their agent's bound: the customer is told, the group notified.
        queue_overdue_sweep()
        # Budget reservations left open by turns that no longer run (the safety net).
        reservations_heal()
        # Replay runs whose worker stopped mid-way go back on the queue.
        replay_runs_resume()
        # Publications a person approved (or refused) in /approvals/ take effect.
        publish_requests_settle()
        # The turns' completion webhooks that are due (or due again).
        turn_webhooks_deliver()
        # The A2A tasks' push notifications (input-required, ended) that are due.
        turn_pushes_deliver()
    finally:
        close_broken_connections()


def _run_retention(stopping: Callable[[], bool]) -> None:
    try:
        with stopping_when(stopping):
            # The recent days summed first, so a day is summed before its steps go.
            usage_rollup()
            retention_apply()
    except Stopped:
        logger.info("retention stopped between two batches: the worker is stopping")
    finally:
        close_broken_connections()
