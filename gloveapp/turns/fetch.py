"""Taking Django tasks from the configured backend inside `turn_worker`.

Each fetcher runs the backend's own worker code (django-tasks-db's `Worker.run_task`, RQ's
`SimpleWorker`), so task results, failures and the admin's records are the backend's; the
turn task itself only hands its session to the engine's loop and returns.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.db.utils import OperationalError
from django.tasks import task_backends

logger = logging.getLogger(__name__)


def fetcher_for_backend(alias: str = "default") -> Any:
    backend = task_backends[alias]
    name = type(backend).__module__
    if name.startswith("django_tasks_db"):
        return _db_fetcher(alias)
    if name.startswith("django_tasks_rq"):
        return _rq_fetcher()
    raise ValueError(f"turn_worker cannot take tasks from {type(backend).__name__}")


def _db_fetcher(alias: str) -> Any:
    from django_tasks_db.management.commands.db_worker import Worker
    from django_tasks_db.models import DBTaskResult
    from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

    def take_one(worker: Worker) -> bool:
        tasks = DBTaskResult.objects.ready().filter(backend_name=alias)
        # One plain read while idle, instead of an exclusive transaction every poll.
        if not tasks.exists():
            return False
        try:
            with exclusive_transaction(tasks.db):
                task_result = tasks.get_locked()
                if task_result is not None:
                    task_result.claim(worker.worker_id)
        except OperationalError as exc:
            if is_locked_database_exception(exc):
                return False
            raise
        if task_result is None:
            return False
        worker.run_task(task_result)
        return True

    async def fetch(engine: Any) -> None:
        worker = Worker(
            queue_names=["*"],
            interval=settings.GLOVE_TURN_POLL_SECONDS,
            batch=False,
            backend_name=alias,
            startup_delay=False,
            max_tasks=None,
            worker_id=engine.worker_id,
            excluded_queue_names=[],
        )
        while not engine.stopping:
            try:
                took = await sync_to_async(take_one)(worker)
            except Exception:
                logger.exception("could not take a task from the database queue")
                await sync_to_async(close_old_connections)()
                took = False
            if not took:
                await asyncio.sleep(settings.GLOVE_TURN_POLL_SECONDS)

    return fetch


def _rq_fetcher() -> Any:
    import django_rq
    from django_tasks_rq.backend import Job
    from rq.timeouts import TimerDeathPenalty
    from rq.worker import SimpleWorker

    class ThreadWorker(SimpleWorker):
        # Signals belong to the main thread (the engine's loop handles them there), so job
        # timeouts use a timer instead of SIGALRM.
        death_penalty_class = TimerDeathPenalty

        def _install_signal_handlers(self) -> None:
            pass

    async def fetch(engine: Any) -> None:
        queue = django_rq.get_queue("default", job_class=Job)
        worker = ThreadWorker([queue], connection=queue.connection, job_class=Job)
        done = threading.Event()

        def work() -> None:
            try:
                worker.work(with_scheduler=False, logging_level="WARNING")
            finally:
                close_old_connections()
                done.set()

        thread = threading.Thread(target=work, name="glove-turns:rq", daemon=True)
        thread.start()
        try:
            while not engine.stopping and not done.is_set():  # noqa: ASYNC110 (a thread flag)
                await asyncio.sleep(0.2)
        finally:
            worker._stop_requested = True

    return fetch
