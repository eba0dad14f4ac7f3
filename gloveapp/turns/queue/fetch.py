"""Taking Django tasks from the configured backend inside `turn_worker`.

Each fetcher runs the backend's own worker code (django-tasks-db's `Worker.run_task`, RQ's
`SimpleWorker`), so task results, failures and the admin's records are the backend's; the
turn task itself only hands its session to the engine's loop and returns.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.db.utils import OperationalError
from django.tasks import task_backends

from gloveapp.lib.db.outages import Backoff, close_broken_connections

logger = logging.getLogger(__name__)
# How often `turn_worker` refreshes its RQ worker record and checks `rq suspend`.
HEARTBEAT_SECONDS = 1.0


def fetcher_for_backend(alias: str = "default") -> Any:
    backend = task_backends[alias]
    name = type(backend).__module__
    if name.startswith("django_tasks_db"):
        return _db_fetcher(alias)
    if name.startswith("django_tasks_rq") or name == "gloveapp.turns.queue.rq_backend":
        return _rq_fetcher()
    raise ValueError(f"turn_worker cannot take tasks from {type(backend).__name__}")


def _db_fetcher(alias: str) -> Any:
    from django_tasks_db.management.commands.db_worker import Worker
    from django_tasks_db.models import DBTaskResult
    from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

    def take_one(worker: Worker, probe: bool) -> bool:
        tasks = DBTaskResult.objects.ready().filter(backend_name=alias)
        # One plain read while idle, instead of an exclusive transaction every poll (after
        # a task was taken, the next is likely there: no probe).
        if probe and not tasks.exists():
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
        took = False
        backoff = Backoff("database queue fetcher", log=logger)
        while not engine.stopping:
            try:
                took = await sync_to_async(take_one)(worker, not took)
            except Exception as error:
                # The database away: a new connection after a backoff. A task claimed but
                # not run stays claimed; its turn stays queued, and the sweep
                # (`sessions_waiting`) hands its session to the queue again.
                await sync_to_async(close_broken_connections)()
                await asyncio.sleep(backoff.failed(error))
                took = False
                continue
            backoff.succeeded()
            if not took:
                await engine.wait_for_task()

    return fetch


def _rq_fetcher() -> Any:
    from rq.worker import SimpleWorker

    from gloveapp.turns.queue.rq_backend import NoDeathPenalty, TurnJob, get_queue

    class ThreadWorker(SimpleWorker):
        # Signals belong to the main thread (the engine's loop handles them there), so no
        # SIGALRM; and no timer thread per job either: the task only hands its session to
        # the engine's loop and returns (the turn is bounded by its lease and limits).
        death_penalty_class = NoDeathPenalty
        # RQ backs off up to a minute between attempts while Redis is unreachable: a
        # Redis back from a freeze would then wait that long for its workers.
        max_connection_wait_time = 2

        def _install_signal_handlers(self) -> None:
            pass

        # RQ's loop sends the worker's heartbeat (3 commands, 3 round trips) and its
        # suspension check around every job, and rewrites an unchanged state: ~20 round
        # trips per job, each waiting on the GIL of a busy worker. Here they go at most once
        # a second, pipelined (the worker's key lives worker_ttl + 60 s), and the state is
        # written when it changes: ~9 round trips per job, all of them the job's own.
        def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
            if pipeline is not None:
                super().heartbeat(timeout, pipeline=pipeline)
                return
            now = time.monotonic()
            if timeout is None and now < getattr(self, "_next_heartbeat", 0.0):
                return
            self._next_heartbeat = now + HEARTBEAT_SECONDS
            with self.connection.pipeline(transaction=False) as batch:
                super().heartbeat(timeout, pipeline=batch)
                batch.execute()

        def set_state(self, state: str, pipeline: Any = None) -> None:
            if pipeline is None and state == getattr(self, "_state", None):
                return
            super().set_state(state, pipeline=pipeline)

        def check_for_suspension(self, burst: bool) -> None:
            now = time.monotonic()
            if now < getattr(self, "_next_suspension_check", 0.0):
                return
            self._next_suspension_check = now + HEARTBEAT_SECONDS
            super().check_for_suspension(burst)

    async def fetch(engine: Any) -> None:
        # The process's shared Redis client: the one enqueues and callbacks use too.
        queue = get_queue("default")

        # Several RQ workers, one thread each: a job is ~9 Redis round trips, and each
        # waits for the GIL of a busy worker process, so one thread alone dispatched
        # sessions more slowly than the turns ran. worker_ttl: RQ blocks on the queue for
        # worker_ttl - 15 s; 16 s makes that one second, so a thread notices a stop
        # promptly (the record lives 76 s unrenewed).
        def new_worker() -> ThreadWorker:
            return ThreadWorker(
                [queue], connection=queue.connection, job_class=TurnJob, worker_ttl=16
            )

        workers = [new_worker() for _ in range(settings.GLOVE_TURN_RQ_WORKERS)]
        finished: list[threading.Event] = []

        def work(index: int, done: threading.Event) -> None:
            try:
                while not engine.stopping:
                    try:
                        workers[index].work(with_scheduler=False, logging_level="WARNING")
                        return  # asked to stop
                    except Exception:
                        # Redis failed outside the dequeue RQ retries (a frozen or restarted
                        # Redis): a fresh worker, not a thread gone for good.
                        logger.warning("an RQ worker stopped; starting another", exc_info=True)
                        time.sleep(1)
                        workers[index] = new_worker()
            finally:
                close_old_connections()
                done.set()

        for index in range(len(workers)):
            done = threading.Event()
            finished.append(done)
            threading.Thread(
                target=work, args=(index, done), name=f"glove-turns:rq{index}", daemon=True
            ).start()
        try:
            while not engine.stopping and not all(done.is_set() for done in finished):  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        finally:
            for worker in workers:
                worker._stop_requested = True

    return fetch
