"""The replay's Django task: one batch of a run, then the next batch as a task of its own,
so no task holds a worker long and a worker's death loses at most one batch, which the
sweep (`replay_runs_resume`, run by the turn worker's scheduler) hands to a worker again:
each conversation is still replayed and counted once (`runs`)."""

from __future__ import annotations

import logging
from typing import Any

from django.tasks import task

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


def replay_runs_resume() -> int:
    """Enqueue again the runs that stopped with their worker; how many."""
    stalled = replay_runs_stalled()
    for run_id in stalled:
        replay_run_enqueue(run_id)
    return len(stalled)
