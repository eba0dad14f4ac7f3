"""The turn worker: an engine that runs many sessions' turns at once on one event loop.

`manage.py turn_worker` starts one engine per process: it takes tasks from the configured
Django Tasks backend (`turns.queue.fetch`), claims each session's next turn in the database
and runs it (`turns.single_turn`). Turns wait on the model, not the CPU, so one process runs up to
GLOVE_TURN_CONCURRENCY of them. A watcher hands its turns the prompt answers and cancels that
any server process stored (on PostgreSQL as soon as a NOTIFY on `services.TURNS_CHANNEL` says
so, on a SQLite file as soon as a local wake-up does (`gloveapp.wake`), rechecking every
GLOVE_TURN_ANSWER_RECHECK_SECONDS; elsewhere every GLOVE_TURN_POLL_SECONDS; idle, it
sleeps), renews their leases, and takes back turns whose worker died (another worker's lease
ran out) to run them again. Its scheduler runs the periodic work: approvals' deadlines, inbox
expiry, retention (`turns.retention`).

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
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import connections

from gloveapp.approvals.services import decisions_for_turns
from gloveapp.approvals.tasks import approval_deadlines
from gloveapp.conversations.append import FencedOff
from gloveapp.core.abort import AbortController
from gloveapp.core.display import DisplayManager, Slot, SlotRejectedError
from gloveapp.core.types import AbortError
from gloveapp.db import (
    Backoff,
    close_broken_connections,
    healing,
    is_database_outage,
    retry_while_unreachable,
)
from gloveapp.live.relay import listen_params, listen_postgres
from gloveapp.turns import observe_turn, services
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.observe_turn import TurnObserver
from gloveapp.turns.retention import retention_apply
from gloveapp.turns.single_turn import (
    agent_tools,
    answer_turn,
    model_provider,
    readable_error,
    slot_template,
    turn_agent,
)
from gloveapp.wake import TURNS as WAKE_TURNS
from gloveapp.wake import WakeListener
from inbox.services import expire_inbox_items

logger = logging.getLogger(__name__)

_current: TurnEngine | None = None
# How often a worker looks for stop requests of its running turns.
CANCEL_CHECK_SECONDS = 0.25


def current_engine() -> TurnEngine | None:
    """The engine serving in this process, if any."""
    return _current


class TurnDisplay(DisplayManager):
    """The display of one attempt of a turn. A continuing attempt re-runs the call that
    waited on a person: a slot it pushes again (same call, same renderer, in order) gets the
    id the earlier attempt stored, so it finds the same row, request and answer; other slots
    get ids no earlier attempt of the turn used."""

    def __init__(self, kept: list[tuple[str, str | None, str, str, bool]] | None = None) -> None:
        super().__init__()
        kept = kept or []
        self._kept = [
            (slot_id, call_id, renderer)
            for slot_id, call_id, renderer, status, _waits in kept
            if status not in (TurnSlot.Status.EXPIRED, TurnSlot.Status.REJECTED)
        ]
        self._slot_count = max((_slot_number(row[0]) for row in kept), default=0)

    def _new_slot(self, renderer: str, input: Any, display_strategy: Any, *rest: Any) -> Slot:
        slot = super()._new_slot(renderer, input, display_strategy, *rest)
        for index, (slot_id, call_id, kept_renderer) in enumerate(self._kept):
            if call_id == slot.call_id and kept_renderer == renderer:
                del self._kept[index]
                slot.id = slot_id
                break
        return slot


def _slot_number(slot_id: str) -> int:
    number = slot_id.removeprefix("slot_")
    return int(number) if number.isascii() and number.isdigit() else 0


@dataclass(slots=True)
class RunningTurn:
    turn: Turn
    display: DisplayManager = field(default_factory=DisplayManager)
    abort: AbortController = field(default_factory=AbortController)
    # The attempt itself (cancelled when it parks), and the timer that parks it.
    task: asyncio.Future[Any] | None = None
    park_timer: asyncio.Task[Any] | None = None
    parked: bool = False
    announcer: _Announcer | None = None
    unsubscribe: Callable[[], None] | None = None


class TurnEngine:
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
        # PostgreSQL: the LISTEN connection is up (answers and stops arrive by NOTIFY), and
        # the turns notified since the watcher last looked.
        self.listening = False
        self._notified: set[int] = set()
        self._nudge: asyncio.Event | None = None
        # PostgreSQL: set when a task was enqueued on the database queue (NOTIFY), so the
        # fetcher takes it at once instead of at its next poll.
        self._task_enqueued: asyncio.Event | None = None
        # The turns' database work runs on a few dedicated threads (one connection each),
        # not asgiref's one shared thread: with many turns at once, that one thread was
        # the whole worker's bottleneck. A session always lands on the same thread.
        self._db_threads = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"glove-turns-db{index}")
            for index in range(settings.GLOVE_TURN_DB_THREADS)
        ]
        self._scheduler_thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="glove-turns-schedule"
        )
        # Retention on a thread of its own: a long round of deletes never delays the
        # approvals' deadlines.
        self._retention_thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="glove-turns-retention"
        )

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
                        services.turn_claim_next, session_id=session_id, worker_id=self.worker_id
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
                services.turn_finish,
                turn_id=turn.pk,
                worker_id=self.worker_id,
                status=Turn.Status.CANCELLED,
                error="stopped",
            )
            return
        kept = await self._db(services.turn_slots_kept, turn=turn) if turn.continues else []
        state = RunningTurn(turn=turn, display=TurnDisplay(kept))
        self.running[turn.pk] = state
        # The idle watcher sleeps until the next sweep: it looks after this turn from now.
        self._nudge_event().set()
        status, error, reply = Turn.Status.DONE, "", ""
        announcer: _Announcer | None = None
        observer: TurnObserver | None = None
        interrupted = taken_back = parked = False
        try:
            spec = await sync_to_async(turn_agent)(turn)
            tools = agent_tools(spec)
            observer = TurnObserver(turn, agent=spec.name, provider=model_provider(spec))
            observe_turn.turn_started(turn, agent=spec.name)
            # Current from here: the task below copies the context, so its spans are children.
            observer.begin_span(self.worker_id)
            observer.attempt_started()
            announcer = state.announcer = _Announcer(
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
                    rerun=services.calls_waiting(kept),
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
        except FencedOff:
            # A write found the turn taken back (this worker stalled past its lease): it
            # stored nothing, and the turn is another worker's now. Stop here, quietly.
            taken_back = True
        except Exception as exc:
            if is_database_outage(exc):
                interrupted = True
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
            logger.warning("turn %s lost the database; it will run again", turn.pk)
            await sync_to_async(close_broken_connections)()
            await self._db(services.turn_release, turn=turn, worker_id=self.worker_id)
            return
        # False when another worker took the turn back meanwhile: it is theirs now.
        finished = await self._db(
            services.turn_finish,
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
            if not _waits(state):
                return  # answered meanwhile; a later prompt arms the timer again
            announcer = state.announcer
            if announcer is not None and announcer.settled(state.display.stack):
                break
            delay = 0.05  # its prompt's row is still being written
        observer = state.announcer.observer if state.announcer is not None else None
        outcome = await self._db(
            services.turn_park,
            turn=state.turn,
            worker_id=self.worker_id,
            slot_ids=[slot.id for slot in state.display.stack if slot.waits_for_answer],
            usage=observer.usage if observer is not None else None,
            model=observer.model if observer is not None else "",
        )
        if outcome == services.Park.PARKED:
            # No await from here to the cancel: nothing of this attempt runs after the park.
            state.parked = True
            if state.unsubscribe is not None:
                state.unsubscribe()  # its slots stay open in the database, not "removed"
            if state.task is not None:
                state.task.cancel()
        elif outcome == services.Park.ANSWERED:
            # An answer (or a Stop) came first: hand it over now, and look again later.
            self._notified.add(state.turn.pk)
            self._nudge_event().set()
            state.park_timer = None
            self._arm_park(state)

    # -- the watcher ---------------------------------------------------------------------------
    async def watch(self) -> None:
        lease = settings.GLOVE_TURN_LEASE_SECONDS
        next_heartbeat = next_sweep = next_cancel_check = next_answer_check = 0.0
        nudge = self._nudge_event()
        backoff = Backoff("turn watcher")
        pause = 0.0
        while not self._stopping:
            # Idle (no running turn) there is nothing to deliver or renew: it sleeps until
            # nudged (a turn starts, an answer is notified) or the next sweep is due.
            timeout = (
                settings.GLOVE_TURN_POLL_SECONDS
                if self.running
                else max(settings.GLOVE_TURN_POLL_SECONDS, next_sweep - time.monotonic())
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(nudge.wait(), timeout)
            nudge.clear()
            if pause:
                await asyncio.sleep(pause)
            try:
                now = time.monotonic()
                notified, self._notified = self._notified, set()
                if self.running:
                    # Answers: when notified (PostgreSQL), else on every poll; and, as a
                    # safety net for a lost notification, every ANSWER_RECHECK seconds.
                    answers_too = (
                        not self.listening
                        or bool(notified & self.running.keys())
                        or now >= next_answer_check
                    )
                    if answers_too:
                        next_answer_check = now + settings.GLOVE_TURN_ANSWER_RECHECK_SECONDS
                    cancels_too = now >= next_cancel_check or bool(notified & self.running.keys())
                    if cancels_too:
                        next_cancel_check = now + CANCEL_CHECK_SECONDS
                    await self._deliver_answers_and_cancels(
                        answers_too=answers_too, cancels_too=cancels_too
                    )
                if now >= next_heartbeat:
                    next_heartbeat = now + lease / 3
                    await self._heartbeat()
                if now >= next_sweep:
                    next_sweep = now + min(lease / 2, 2.0)
                    await self._sweep()
            except Exception as error:
                # The database away must not stop the watcher: the next round retries,
                # after a backoff, on a new connection.
                await sync_to_async(close_broken_connections)()
                pause = backoff.failed(error)
            else:
                pause = 0.0
                backoff.succeeded()

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
        while not self._stopping:
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
        while not self._stopping:
            try:
                await loop.run_in_executor(self._retention_thread, _run_retention)
            except Exception as error:
                backoff.failed(error)
            else:
                backoff.succeeded()
            await asyncio.sleep(settings.GLOVE_RETENTION_SECONDS)

    def _task_event(self) -> asyncio.Event:
        if self._task_enqueued is None:
            self._task_enqueued = asyncio.Event()
        return self._task_enqueued

    async def wait_for_task(self) -> None:
        """Until a task may be waiting: told by NOTIFY (PostgreSQL, while listening, with a
        recheck every GLOVE_TURN_ANSWER_RECHECK_SECONDS for a lost one), else at the next
        poll (GLOVE_TURN_POLL_SECONDS)."""
        event = self._task_event()
        timeout = (
            settings.GLOVE_TURN_ANSWER_RECHECK_SECONDS
            if self.listening
            else settings.GLOVE_TURN_POLL_SECONDS
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
        event.clear()

    def _nudge_event(self) -> asyncio.Event:
        if self._nudge is None:
            self._nudge = asyncio.Event()
        return self._nudge

    async def listen(self) -> None:
        """PostgreSQL: LISTEN for answered prompts and stop requests of turns, on a
        connection of this worker's own (one per process), and wake the watcher."""
        nudge = self._nudge_event()

        def connected() -> None:
            self.listening = True
            # Whatever was answered while nobody listened: the next round looks.
            self._notified.update(self.running)
            nudge.set()

        def lost() -> None:
            self.listening = False

        await listen_postgres(
            services.TURNS_CHANNEL,
            params=await sync_to_async(listen_params)(),
            on_connect=connected,
            on_notify=self._notified_of,
            on_lost=lost,
            label="turns",
        )

    def _notified_of(self, payload: str) -> None:
        """A NOTIFY (PostgreSQL) or a local wake-up (SQLite): a task was enqueued, or a
        running turn has an answer or a stop waiting."""
        if payload == services.TASK_ENQUEUED:
            self._task_event().set()
            return
        with contextlib.suppress(ValueError):
            self._notified.add(int(payload))
        self._nudge_event().set()

    def _wake_locally(self) -> WakeListener | None:
        """SQLite: wake-ups from the processes of this machine (`gloveapp.wake`) stand for
        NOTIFY, so an idle worker waits instead of polling every GLOVE_TURN_POLL_SECONDS."""
        listener = WakeListener(WAKE_TURNS, self._notified_of)
        if not listener.start():
            return None
        self.listening = True
        return listener

    async def _deliver_answers_and_cancels(
        self, *, answers_too: bool = True, cancels_too: bool
    ) -> None:
        # Answers only for turns that wait on a prompt; stop requests less often.
        waiting = (
            [turn_id for turn_id, state in self.running.items() if _waits(state)]
            if answers_too
            else []
        )
        ids = list(self.running) if cancels_too else []
        if not waiting and not ids:
            return
        answers, cancels = await sync_to_async(_answers_and_cancels)(waiting, ids, self.worker_id)
        for turn_id, slot_id, answer in answers:
            state = self.running.get(turn_id)
            if state is not None and state.display.is_waiting(slot_id):
                if services.is_dismissal(answer):
                    dismiss(state.display, slot_id)
                else:
                    state.display.resolve(slot_id, (answer or {}).get("value"))
        for turn_id in cancels:
            state = self.running.get(turn_id)
            if state is not None and not state.abort.signal.aborted:
                state.abort.abort("cancelled")

    async def _heartbeat(self) -> None:
        if not self.running:
            return
        ids = list(self.running)
        held = await sync_to_async(services.turns_heartbeat)(turn_ids=ids, worker_id=self.worker_id)
        for turn_id in set(ids) - held:
            state = self.running.get(turn_id)
            if state is not None:
                # Taken back by another worker (this one stalled past its lease): stop here,
                # the other one runs it now.
                logger.warning("lost the lease of turn %s; stopping it", turn_id)
                state.abort.abort("lease lost")

    async def _sweep(self) -> None:
        sessions = await sync_to_async(services.turns_take_back)()
        lost = await sync_to_async(services.sessions_waiting)(
            older_than=timedelta(seconds=settings.GLOVE_TURN_LEASE_SECONDS)
        )
        for session_id in {*sessions, *lost}:
            # Through the backend, so any worker (not only this one) may take it.
            await sync_to_async(self.requeue)(session_id)

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
                self._spawn(self.watch(), name="glove-turns:watch"),
                self._spawn(self.schedule(), name="glove-turns:schedule"),
            ]
            if connections["default"].vendor == "postgresql":
                jobs.append(self._spawn(self.listen(), name="glove-turns:listen"))
            else:
                waker = self._wake_locally()
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
            if _waits(state):
                # A worker going away parks the turns that wait on a person at once: their
                # answer goes on elsewhere, and no lease has to run out first.
                self._spawn(self._park_later(state, 0.0), name=f"glove-turns:park:{state.turn.pk}")
        deadline = time.monotonic() + grace
        while self.running and time.monotonic() < deadline:  # noqa: ASYNC110 (a deadline, not an event)
            await asyncio.sleep(0.05)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.sleep(0)
        for executor in [*self._db_threads, self._scheduler_thread, self._retention_thread]:
            # Their connections belong to those threads: close them there.
            await asyncio.wrap_future(executor.submit(connections.close_all))
            executor.shutdown(wait=False)

    async def run_session(self, session_id: str) -> None:
        """Run one session's queued turns to the end, the watcher beside them (a plain
        backend worker, `db_worker` or `rqworker`, runs each task so)."""
        self.loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(1)
        watcher = asyncio.ensure_future(self.watch())
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


def _run_scheduled() -> None:
    try:
        approval_deadlines.call()
        # Inbox items past their expires_at are answered "Expired: ..." (no cron line).
        expire_inbox_items()
    finally:
        close_broken_connections()


def _run_retention() -> None:
    try:
        retention_apply()
    finally:
        close_broken_connections()


def dismiss(display: DisplayManager, slot_id: str) -> None:
    """The customer dismissed the slot: its waiting tool's wait is rejected, as Glove's
    `reject(slotId)` (the tool throws; the executor runs it again, and it may ask again)."""
    display.reject(slot_id, SlotRejectedError(f'The customer dismissed "{slot_id}".'))


def _waits(state: RunningTurn) -> bool:
    return not state.parked and any(slot.waits_for_answer for slot in state.display.stack)


def _answers_and_cancels(
    waiting: list[int], running: list[int], worker_id: str
) -> tuple[list[tuple[int, str, Any]], list[int]]:
    answers: list[tuple[int, str, Any]] = []
    cancels: list[int] = []
    if waiting:
        # Only to turns this worker still holds: one frozen past its lease must not hand an
        # answer to its stale attempt (the tool's own writes are not fenced) while the
        # retry on another worker waits for the same answer.
        waiting = list(
            Turn.objects.filter(
                pk__in=waiting, status=Turn.Status.RUNNING, worker_id=worker_id
            ).values_list("pk", flat=True)
        )
    if waiting:
        answers = list(
            TurnSlot.objects.filter(
                turn_id__in=waiting, status=TurnSlot.Status.ANSWERED
            ).values_list("turn_id", "slot_id", "answer")
        )
        # Approvals: only a recorded decision is handed over (as the slot's answer).
        answers += [
            (turn_id, slot_id, {"value": decision})
            for turn_id, slot_id, decision in decisions_for_turns(waiting)
        ]
    if running:
        cancels = list(
            Turn.objects.filter(pk__in=running, cancel_requested=True).values_list("pk", flat=True)
        )
    return answers, cancels


class _Announcer:
    """Mirrors a turn's display stack into TurnSlot rows (pushes and closes). A slot an
    earlier attempt stored is found again; if it was answered (or its request decided), the
    waiting tool gets that answer at once."""

    def __init__(
        self,
        turn: Turn,
        tools: dict[str, Any],
        display: DisplayManager | None = None,
        on_wait: Callable[[], None] | None = None,
        observer: TurnObserver | None = None,
    ) -> None:
        self.turn = turn
        self.tools = tools
        self.display = display
        self.on_wait = on_wait
        self.observer = observer
        self.announced: dict[str, Slot] = {}
        self.stored: set[str] = set()  # slots whose rows are written (or found again)
        self.pushed_any = False  # a row was written: the turn's end looks for prompts to expire
        self._in_order = asyncio.Lock()

    def settled(self, stack: list[Slot]) -> bool:
        """Every slot that waits for an answer has its row: the turn may park."""
        return all(slot.id in self.stored for slot in stack if slot.waits_for_answer)

    async def announce(self, stack: list[Slot]) -> None:
        # One change of the stack at a time, in order: a wait that closed is recorded (its
        # step kept) before the next prompt's push, which may park the turn (a parked
        # attempt records nothing more).
        async with self._in_order:
            await self._announce(stack)

    async def _announce(self, stack: list[Slot]) -> None:
        current = {slot.id: slot for slot in stack}
        pushed = [slot for slot_id, slot in current.items() if slot_id not in self.announced]
        gone = [slot for slot_id, slot in self.announced.items() if slot_id not in current]
        self.announced = current
        self.pushed_any = self.pushed_any or bool(pushed)
        for slot in gone:
            await sync_to_async(services.slot_close)(
                turn=self.turn, slot_id=slot.id, status=slot.status
            )
            if self.observer is not None:
                await self.observer.wait_closed(slot)
        for slot in pushed:
            if self.observer is not None and slot.waits_for_answer:
                await self.observer.wait_opened(slot.id)
            outcome = await sync_to_async(services.slot_push)(
                turn=self.turn, slot=slot, template=slot_template(self.tools, slot)
            )
            if outcome is None:
                continue
            self.stored.add(slot.id)
            if self.observer is not None and slot.waits_for_answer:
                row = outcome.row if isinstance(outcome, services.Kept) else outcome
                self.observer.wait_stored(
                    slot.id, row.created_at, closed=row.status in services.CLOSED_SLOT_STATUSES
                )
            if not slot.waits_for_answer or self.display is None:
                continue
            if isinstance(outcome, services.Kept) and outcome.dismissed:
                dismiss(self.display, slot.id)
            elif isinstance(outcome, services.Kept) and outcome.answered:
                self.display.resolve(slot.id, outcome.answer)
            elif self.on_wait is not None:
                self.on_wait()
