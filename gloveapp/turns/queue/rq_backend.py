"""django-tasks-rq, tuned for turn tasks that only hand a session to a worker's event loop.

`GLOVE_TASKS_BACKEND=rq` selects `TurnsRQBackend`: django-tasks-rq's `RQBackend` (its jobs,
queues, results and admin records unchanged) with three costs taken out of every turn:

- **One Redis client per process, one round trip per enqueue.** django-rq builds a new `Redis` (a new connection pool,
  so a new TCP connection, `SELECT` and `CLIENT SETINFO`) on every `get_queue()`: once per
  enqueue, and again in every job's callbacks. Here enqueues, the worker and the callbacks
  share one client per queue and process (its pool is thread-safe and fork-aware).
- **Signals without Redis reads.** django-tasks-rq rebuilds a job's `TaskResult` from Redis
  (status twice, the results stream, the scheduled registry) to send `task_started` and
  `task_finished`; the worker already holds every field it needs, so `TurnJob` builds them
  from the job in memory. `get_result()` still reads Redis (the backend's records).
- **No timer thread per job.** RQ's `TimerDeathPenalty` (the one a worker thread may use)
  starts a thread for the job and another for its callback; the turn task returns at once
  (the turn runs on the engine's loop, bounded by its own lease and limits), so
  `turn_worker` runs jobs under `NoDeathPenalty`.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import django_rq
from django_tasks.base import DEFAULT_TASK_PRIORITY, TASK_MAX_PRIORITY, TaskResult
from django_tasks.base import TaskResultStatus as Status
from django_tasks.signals import task_enqueued, task_finished, task_started
from django_tasks.utils import get_random_id
from django_tasks_rq.backend import Job, RQBackend, failed_callback
from redis import Redis
from rq.job import Callback, JobStatus
from rq.timeouts import BaseDeathPenalty

_clients: dict[tuple[int, str, str], Redis] = {}
_clients_lock = threading.Lock()


def redis_client(queue_name: str = "default") -> Redis:
    """The process's Redis client for `queue_name` (RQ_QUEUES), built once per setting.

    With bounded socket timeouts (GLOVE_RQ_SOCKET_TIMEOUT_SECONDS): django-rq's client
    waits forever, so an enqueue to a frozen Redis held the request that posted the message
    (the turn is stored first; `queue.tasks.enqueue_session` leaves a refused one to the sweep)."""
    from django.conf import settings
    from django_rq.settings import QUEUES

    config = QUEUES[queue_name]
    key = (os.getpid(), queue_name, repr(sorted(config.items())))
    client = _clients.get(key)
    if client is None:
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                timeout = settings.GLOVE_RQ_SOCKET_TIMEOUT_SECONDS
                if "URL" in config and not config.get("SSL"):
                    client = Redis.from_url(
                        config["URL"],
                        db=config.get("DB"),
                        socket_timeout=timeout,
                        socket_connect_timeout=timeout,
                    )
                else:  # Sentinel, SSL, a cache's client: as django-rq builds them
                    client = django_rq.get_connection(queue_name)
                _clients[key] = client
    return client


def get_queue(queue_name: str = "default") -> Any:
    return django_rq.get_queue(queue_name, job_class=TurnJob, connection=redis_client(queue_name))


def _result_from_job(job: Job, status: Status) -> TaskResult:
    """The job's TaskResult from what the worker holds in memory (no Redis read)."""
    backend = job.meta["backend_name"]
    return TaskResult(
        task=job.func.using(priority=DEFAULT_TASK_PRIORITY, queue_name=job.origin, backend=backend),
        id=job.id,
        status=status,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at,
        last_attempted_at=job.started_at,
        finished_at=job.ended_at,
        args=list(job.args),
        kwargs=job.kwargs,
        backend=backend,
        errors=[],
        worker_ids=[job.worker_name] if job.worker_name else [],
    )


class TurnJob(Job):
    def perform(self) -> Any:
        result = _result_from_job(self, Status.RUNNING)
        task_started.send(type(result.task.get_backend()), task_result=result)
        # RQ's own perform (django-tasks-rq's `_execute` calls the Task).
        return super(Job, self).perform()


def turn_task_succeeded(job: Job, connection: Redis | None, result: Any) -> None:
    task_result = _result_from_job(job, Status.SUCCESSFUL)
    task_finished.send(type(task_result.task.get_backend()), task_result=task_result)


class NoDeathPenalty(BaseDeathPenalty):
    """No job timeout: the turn task only hands its session over and returns."""

    def setup_death_penalty(self) -> None:
        pass

    def cancel_death_penalty(self) -> None:
        pass


class TurnsRQBackend(RQBackend):
    """django-tasks-rq's backend on the process's shared Redis client (see the module)."""

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        task_result: TaskResult = TaskResult(
            task=task,
            id=get_random_id(),
            status=Status.READY,
            enqueued_at=None,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        queue = get_queue(task.queue_name)
        job = queue.create_job(
            task.module_path,
            args=args,
            kwargs=kwargs,
            job_id=task_result.id,
            status=JobStatus.SCHEDULED if task.run_after else JobStatus.QUEUED,
            on_failure=Callback(failed_callback),
            on_success=Callback(turn_task_succeeded),
            meta={"backend_name": self.alias},
        )
        if task.run_after is None:
            # One round trip: RQ's own enqueue sends the queue registration and the job in
            # two transactions unless it is handed a pipeline.
            with queue.connection.pipeline() as pipeline:
                job = queue.enqueue_job(
                    job, pipeline=pipeline, at_front=task.priority == TASK_MAX_PRIORITY
                )
                pipeline.execute()
        else:
            job = queue.schedule_job(job, task.run_after)
        object.__setattr__(task_result, "enqueued_at", job.enqueued_at)
        task_enqueued.send(type(self), task_result=task_result)
        return task_result

    def _get_job(self, result_id: str) -> Job | None:
        from rq.exceptions import NoSuchJobError

        try:
            return TurnJob.fetch(result_id, connection=redis_client())
        except NoSuchJobError:
            return None
