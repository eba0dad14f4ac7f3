"""The turn engine: runs many sessions' turns at once on one event loop.

`manage.py turn_worker` starts one engine per process: it takes tasks from the configured
Django Tasks backend (`turns.queue.fetch`), claims each session's next turn in the database
(`turns.claim`) and runs it (`turns.single_turn`). Turns wait on the model, not the CPU, so one
process runs up to GLOVE_TURN_CONCURRENCY of them. Beside them run its watcher
(`turns.watcher`: answers, stops, leases, the sweep) and its scheduler (`turns.scheduler`: the
periodic work). A turn that waits on a person is parked (`turns.parking`), freeing its slot.

The engine knows nothing of the queue: the task (`turns.queue.tasks`) hands it sessions
through `dispatch`, and it puts sessions back through the `requeue` it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import socket
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import connections

from gloveapp.conversations.append import FencedOff
from gloveapp.core.types import AbortError
from gloveapp.lib.db.outages import (
    close_broken_connections,
    describe_database_error,
    healing,
    is_database_outage,
    is_transaction_conflict,
    retry_while_unreachable,
)
from gloveapp.lib.wake import WakeListener
from gloveapp.turns import claim, lifecycle, observe_turn, parking, slots
from gloveapp.turns.announcer import SlotAnnouncer
from gloveapp.turns.models import Turn
from gloveapp.turns.observe_turn import TurnObserver
from gloveapp.turns.person_gate import (
    REFUSED,
    WITHHELD,
    WITHHELD_NOTE,
    PersonAnswers,
    turn_withheld,
)
from gloveapp.turns.running import RunningTurn, TurnDisplay, waits
from gloveapp.turns.scheduler import TurnScheduler
from gloveapp.turns.single_turn import (
    agent_tools,
    answer_turn,
    model_provider,
    readable_error,
    turn_agent,
)
from gloveapp.turns.watcher import TurnWatcher

logger = logging.getLogger(__name__)

_current: TurnEngine | None = None


def current_engine() -> TurnEngine | None:
    """The engine serving in this process, if any."""
    return _current


class TurnEngine:
    """Runs many sessions' turns at once on one event loop, its watcher and scheduler beside
    them (`serve`), or one session's turns for a plain backend worker (`run_session`)."""

    def __init__(
        self,
        *,
        requeue: Callable[[str], bool],
        worker_id: str | None = None,
        concurrency: int | None = None,
    ) -> None:
        # How a session goes back on the queue (`queue.tasks.enqueue_session`), so any
        # worker may take it: turns taken back from a dead worker, sessions left waiting.
        self.requeue = requeue
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"[:64]
        self.concurrency = concurrency or settings.GLOVE_TURN_CONCURRENCY
        self.loop: asyncio.AbstractEventLoop | None = None
        self.running: dict[int, RunningTurn] = {}
        self._slots: asyncio.Semaphore | None = None
        self._draining: set[str] = set()
        self._again: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self.watcher = TurnWatcher(self)
        self.scheduler = TurnScheduler(stopping=lambda: self._stopping, spawn=self._spawn)
        # The turns' database work runs on a few dedicated threads (one connection each),
        # not asgiref's one shared thread: with many turns at once, that one thread was
        # the whole worker's bottleneck. A session always lands on the same thread.
        self._db_threads = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"glove-turns-db{index}")
            for index in range(settings.GLOVE_TURN_DB_THREADS)
        ]

    # -- handing sessions to the loop --------------------------------------------------------
    def dispatch(self, session_id: str) -> None:
        """Run the session's queued turns on this engine's loop; callable from any thread."""
        assert self.loop is not None, "the engine is not serving"
        self.loop.call_soon_threadsafe(self._start_drain, session_id)

    def _start_drain(self, session_id: str) -> None:
        if self._stopping:
            # A task taken as the worker stops: its turn stays queued, and a live worker's
            # sweep (`sessions_waiting`) hands the session to the queue again.
            return
        if session_id in self._draining:
            self._again.add(session_id)
            return
        self._draining.add(session_id)
        self._spawn(self._drain(session_id), name=f"glove-turns:{session_id}")

    def _spawn(self, coro: Any, *, name: str) -> asyncio.Task[Any]:
        assert self.loop is not None
        # A fresh context: no request's asgiref executor leaks into the turn.
        task = self.loop.create_task(coro, name=name, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _drain(self, session_id: str) -> bool:
        """Run the session's queued turns; False when it stopped on an error (its turns are
        left queued, or running until their lease runs out, for a retry)."""
        assert self._slots is not None
        executor = self._db_threads[zlib.crc32(session_id.encode()) % len(self._db_threads)]
        try:
            async with self._slots, ThreadSensitiveContext(executor=executor):
                while not self._stopping:
                    self._again.discard(session_id)
                    # While the database is away the claim is retried here (the turn stays
                    # queued meanwhile): the task that brought the session is done, and
                    # nothing else would bring it back before the sweep.
                    turn = await self._db(
                        claim.turn_claim_next, session_id=session_id, worker_id=self.worker_id
                    )
                    if turn is None:
                        if session_id in self._again:
                            continue
                        break
                    await self._run(turn)
        except Exception:
            logger.exception("could not run the turns of session %s", session_id)
            return False
        finally:
            self._draining.discard(session_id)
        return True

    async def _db(self, func: Callable[..., Any], /, **kwargs: Any) -> Any:
        """`func(**kwargs)` on this task's database thread, retried with backoff while the
        database is away (its broken connection closed first), until the engine stops."""
        call = sync_to_async(healing(func))
        return await retry_while_unreachable(
            f"turn worker ({func.__name__})",
            lambda: call(**kwargs),
            stopping=lambda: self._stopping,
        )

    async def _run(self, turn: Turn) -> None:
        if turn.cancel_requested:
            # Stopped while it waited on a person (or on the queue after its worker died):
            # it ends here without running; its open calls are closed, its prompts expire.
            await self._db(
                lifecycle.turn_finish,
                turn_id=turn.pk,
                worker_id=self.worker_id,
                status=Turn.Status.CANCELLED,
                error="stopped",
            )
            return
        kept = await self._db(slots.turn_slots_kept, turn=turn) if turn.continues else []
        state = RunningTurn(turn=turn, display=TurnDisplay(kept))
        self.running[turn.pk] = state
        # The idle watcher sleeps until the next sweep: it looks after this turn from now.
        self.watcher.nudge()
        status, error, reply = Turn.Status.DONE, "", ""
        announcer: SlotAnnouncer | None = None
        observer: TurnObserver | None = None
        interrupted = taken_back = parked = withheld = False
        lost: BaseException | None = None
        try:
            spec = await sync_to_async(turn_agent)(turn)
            tools = agent_tools(spec)
            observer = TurnObserver(turn, agent=spec.name, provider=model_provider(spec))
            observe_turn.turn_started(turn, agent=spec.name)
            # Current from here: the task below copies the context, so its spans are children.
            observer.begin_span(self.worker_id)
            observer.attempt_started()
            announcer = state.announcer = SlotAnnouncer(
                turn,
                tools,
                state.display,
                on_wait=lambda: self._arm_park(state),
                observer=observer,
            )
            state.unsubscribe = state.display.subscribe(announcer.announce)
            state.task = asyncio.ensure_future(
                answer_turn(
                    turn,
                    display=state.display,
                    abort=state.abort.signal,
                    spec=spec,
                    tools=tools,
                    rerun=slots.calls_waiting(kept),
                    observer=observer,
                )
            )
            reply = await state.task
        except asyncio.CancelledError:
            if not state.parked:
                raise
            # Parked on a person (`_park`): the database holds the wait; nothing more here.
            parked = True
        except AbortError:
            status, error = Turn.Status.CANCELLED, "stopped"
        except PersonAnswers:
            # A person took the chat over: the turn's reply is withheld (nothing more of it
            # was stored), its request kept; it ends as done, having said nothing.
            withheld = True
            error = WITHHELD
        except FencedOff:
            # A write found the turn taken back (this worker stalled past its lease): it
            # stored nothing, and the turn is another worker's now. Stop here, quietly.
            taken_back = True
        except Exception as exc:
            if is_database_outage(exc):
                interrupted, lost = True, exc
            else:
                logger.exception("turn %s of session %s failed", turn.pk, turn.session_id)
                status, error = Turn.Status.FAILED, readable_error(exc)
        finally:
            self.running.pop(turn.pk, None)
            if state.park_timer is not None and not parked:
                state.park_timer.cancel()
            if observer is not None:
                observer.end_span(
                    "parked"
                    if parked
                    else "taken_back"
                    if taken_back
                    else "interrupted"
                    if interrupted
                    else status,
                    error,
                )
        if parked:
            logger.info("turn %s waits on a person; parked, its worker slot is free", turn.pk)
            return
        # The announcer records a prompt's answer on a task of the display's: let it land
        # before the turn ends (ending expires the prompts still open).
        with contextlib.suppress(Exception):
            await state.display.notified()
        if taken_back:
            logger.warning("lost the lease of turn %s; stopped it before it stored more", turn.pk)
            return
        if interrupted:
            # The database went away mid-turn: not the turn's failure. What it stored is
            # kept; it goes back on the queue once the database is back, and the drain
            # claims it again at once (a retry resumes, and never answers twice).
            if lost is not None and is_transaction_conflict(lost):
                # Not an outage (the database is there): said as what it is.
                logger.warning(
                    "turn %s met %s; it will run again", turn.pk, describe_database_error(lost)
                )
            else:
                logger.warning("turn %s lost the database; it will run again", turn.pk)
            await sync_to_async(close_broken_connections)()
            await self._db(claim.turn_release, turn=turn, worker_id=self.worker_id)
            return
        if withheld:
            stored = await self._db(claim.turn_request_stored, turn=turn)
            await self._db(turn_withheld, turn=turn, request_stored=stored)
            # Said where the turn's state is read (the page, the timeline's turn).
            await self._db(
                lifecycle.turn_note, turn_id=turn.pk, worker_id=self.worker_id, text=WITHHELD_NOTE
            )
        elif getattr(turn, "refused", False):
            error = REFUSED
        # False when another worker took the turn back meanwhile: it is theirs now.
        finished = await self._db(
            lifecycle.turn_finish,
            turn_id=turn.pk,
            worker_id=self.worker_id,
            status=status,
            error=error,
            reply=reply,
            prompted=announcer is None or announcer.pushed_any,
            model=observer.model if observer is not None else "",
            usage=observer.usage if observer is not None else None,
            steps=observer.take_pending() if observer is not None else None,
            attempt=turn.attempts,
            started_at=turn.started_at,
        )
        if finished and observer is not None:
            observer.finished(status)

    # -- parking a turn that waits on a person -----------------------------------------------
    def _arm_park(self, state: RunningTurn) -> None:
        """A slot of the turn waits for a person: park the turn if it still waits after
        GLOVE_TURN_PARK_AFTER_SECONDS (a quick answer goes on where it runs)."""
        if state.parked or (state.park_timer is not None and not state.park_timer.done()):
            return
        state.park_timer = self._spawn(
            self._park_later(state), name=f"glove-turns:park:{state.turn.pk}"
        )

    async def _park_later(self, state: RunningTurn, delay: float | None = None) -> None:
        delay = settings.GLOVE_TURN_PARK_AFTER_SECONDS if delay is None else delay
        while True:
            await asyncio.sleep(delay)
            if state.parked or self.running.get(state.turn.pk) is not state:
                return
            if not waits(state):
                return  # answered meanwhile; a later prompt arms the timer again
            announcer = state.announcer
            if announcer is not None and announcer.settled(state.display.stack):
                break
            delay = 0.05  # its prompt's row is still being written
        observer = state.announcer.observer if state.announcer is not None else None
        outcome = await self._db(
            parking.turn_park,
            turn=state.turn,
            worker_id=self.worker_id,
            slot_ids=[slot.id for slot in state.display.stack if slot.waits_for_answer],
            usage=observer.usage if observer is not None else None,
            model=observer.model if observer is not None else "",
        )
        if outcome == parking.Park.PARKED:
            if observer is not None:
                observer.settled()  # the park stored what the attempt's store had not
            # No await from here to the cancel: nothing of this attempt runs after the park.
            state.parked = True
            if state.unsubscribe is not None:
                state.unsubscribe()  # its slots stay open in the database, not "removed"
            if state.task is not None:
                state.task.cancel()
        elif outcome == parking.Park.ANSWERED:
            # An answer (or a Stop) came first: hand it over now, and look again later.
            self.watcher.notify(state.turn.pk)
            state.park_timer = None
            self._arm_park(state)

    # -- serving -------------------------------------------------------------------------------
    async def serve(self, *, fetch: Any = None) -> None:
        """Run until `stop()`: the watcher, plus `fetch(engine)` taking backend tasks."""
        global _current
        self.loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(self.concurrency)
        _current = self
        waker: WakeListener | None = None
        try:
            jobs = [
                self._spawn(self.watcher.watch(), name="glove-turns:watch"),
                self._spawn(self.scheduler.schedule(), name="glove-turns:schedule"),
            ]
            if connections["default"].vendor == "postgresql":
                jobs.append(self._spawn(self.watcher.listen(), name="glove-turns:listen"))
            else:
                waker = self.watcher.wake_locally()
            if fetch is not None:
                jobs.append(self._spawn(fetch(self), name="glove-turns:fetch"))
            await asyncio.gather(*jobs)
        finally:
            if waker is not None:
                waker.close()
            if _current is self:
                _current = None

    async def stop(self, *, grace: float = 10.0) -> None:
        """Stop taking work; give running turns `grace` seconds, then leave them to be taken
        back by another worker when their lease runs out. Stopping twice (a second SIGTERM,
        as a shell's `kill 0` sends) is the first stop: its threads are shut down once."""
        if self._stopping:
            return
        self._stopping = True
        for state in list(self.running.values()):
            if waits(state):
                # A worker going away parks the turns that wait on a person at once: their
                # answer goes on elsewhere, and no lease has to run out first.
                self._spawn(self._park_later(state, 0.0), name=f"glove-turns:park:{state.turn.pk}")
        deadline = time.monotonic() + grace
        while self.running and time.monotonic() < deadline:  # noqa: ASYNC110 (a deadline, not an event)
            await asyncio.sleep(0.05)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.sleep(0)
        for executor in [*self._db_threads, *self.scheduler.threads]:
            # Their connections belong to those threads: close them there.
            await asyncio.wrap_future(executor.submit(connections.close_all))
            executor.shutdown(wait=False)

    async def run_session(self, session_id: str) -> None:
        """Run one session's queued turns to the end, the watcher beside them (a plain
        backend worker, `db_worker` or `rqworker`, runs each task so)."""
        self.loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(1)
        watcher = asyncio.ensure_future(self.watcher.watch())
        try:
            drained = await self._drain(session_id)
        finally:
            self._stopping = True
            watcher.cancel()
        if not drained:
            # The task must not be recorded as done for work not done: the backend records
            # the failure (and its retries, if configured); the turns stay for a sweep.
            raise RuntimeError(f"the turns of session {session_id} could not run")

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def listening(self) -> bool:
        """Answers and stops arrive as they are stored (NOTIFY, or a SQLite file's local
        wake-ups), not only at the watcher's polls."""
        return self.watcher.listening

    async def wait_for_task(self) -> None:
        """Until a task may be waiting (the fetcher's pause between polls; `TurnWatcher`)."""
        await self.watcher.wait_for_task()
