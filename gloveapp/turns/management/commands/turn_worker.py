"""`manage.py turn_worker`: run chat turns from the Django Tasks queue until stopped.

Works with the configured backend (GLOVE_TASKS_BACKEND: the database queue or RQ); start as
many as you like, on any machine that reaches the database (and Redis, for RQ).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand

from gloveapp.turns import event_loop
from gloveapp.turns.engine import TurnEngine
from gloveapp.turns.queue.fetch import fetcher_for_backend
from gloveapp.turns.queue.tasks import enqueue_session


class Command(BaseCommand):
    help = "Run chat turns from the task queue (many at once) until SIGINT or SIGTERM."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--concurrency", type=int, default=None)
        parser.add_argument("--worker-id", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        event_loop.run(self._serve(options["concurrency"], options["worker_id"]))

    async def _serve(self, concurrency: int | None, worker_id: str | None) -> None:
        engine = TurnEngine(requeue=enqueue_session, worker_id=worker_id, concurrency=concurrency)
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.Task[None]] = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(
                signum, lambda: stopping.append(loop.create_task(engine.stop()))
            )
        self.stdout.write(f"turn worker {engine.worker_id} ready", ending="\n")
        self.stdout.flush()
        try:
            await engine.serve(fetch=fetcher_for_backend())
            await asyncio.gather(*stopping)  # the stop that ended it closes its threads
        except asyncio.CancelledError:
            pass
        finally:
            # Stopped: a later SIGTERM (a shell's `kill 0` sends a second one) must not meet
            # asyncio's handler while the loop closes (its wake-up fd is gone, and the
            # process hung there), nor cut the clean exit short: it is ignored.
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
                signal.signal(signum, signal.SIG_IGN)
