"""The replay's Django task: one batch of a run, then the next batch as a task of its own,
so no task holds a worker long and a worker's death loses at most one batch, which the
sweep (`replay_runs_resume`, run by the turn worker's scheduler) hands to a worker again:
each conversation is still replayed and counted once (`runs`)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.tasks import task
from django.utils import timezone

from gloveapp.versions.models import AgentVersion, ReplayRun
from gloveapp.versions.replay import UNSEEN_MARK
from gloveapp.versions.runs import replay_run_advance, replay_run_create, replay_runs_stalled

logger = logging.getLogger(__name__)


@task
def replay_run_task(run_id: int) -> None:
    if replay_run_advance(run_id):
        replay_run_enqueue(run_id)


def replay_run_enqueue(run_id: int) -> None:
    try:
        result = replay_run_task.enqueue(run_id)
    except Exception:
        # The queue is away: the run waits, and the sweep enqueues it again.
        logger.exception("could not enqueue replay run %s", run_id)
        return
    ReplayRun.objects.filter(pk=run_id).update(task_id=str(result.id)[:64])


def replay_run_start(
    *,
    version: AgentVersion,
    session_ids: list[str],
    selection: str = "",
    by: Any = None,
    unseen_tools: str = UNSEEN_MARK,
) -> ReplayRun:
    """A replay run on the task backend (the admin's action)."""
    return replay_run_create(
        version=version,
        session_ids=session_ids,
        selection=selection,
        by=by,
        unseen_tools=unseen_tools,
        on_commit=replay_run_enqueue,
    )


class WorkerLost(Exception):
    """What a replay batch's task row says when its worker stopped in the middle of it."""


def replay_runs_resume() -> int:
    """Enqueue again the runs that stopped with their worker; how many. The task row the
    dead worker held is marked failed first (the database queue has no worker registry to
    notice: it would say "running" forever)."""
    stalled = replay_runs_stalled()
    for run_id in stalled:
        _dead_task_failed(run_id)
        replay_run_enqueue(run_id)
    return len(stalled)


def _dead_task_failed(run_id: int) -> None:
    backend = replay_run_task.get_backend()
    if not type(backend).__module__.startswith("django_tasks_db"):
        return  # RQ's registry of started jobs fails an abandoned job itself
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    stored = ReplayRun.objects.filter(pk=run_id).values_list("task_id", flat=True).first()
    try:
        task_id = uuid.UUID(stored or "")
    except ValueError:
        return  # never enqueued, or by another backend (an RQ job's id)
    error = WorkerLost(
        f"The worker running replay run {run_id}'s batch stopped in the middle of it (no "
        "progress for GLOVE_REPLAY_STALLED_SECONDS); the sweep handed the run to a worker "
        "again, which replays only what was not stored."
    )
    # By its primary key, and only while still running: a batch that finished meanwhile
    # keeps its own outcome.
    DBTaskResult.objects.filter(pk=task_id, status=TaskResultStatus.RUNNING).update(
        status=TaskResultStatus.FAILED,
        finished_at=timezone.now(),
        exception_class_path=f"{WorkerLost.__module__}.{WorkerLost.__qualname__}",
        traceback=f"{WorkerLost.__module__}.{WorkerLost.__qualname__}: {error}\n",
        return_value=None,
    )
