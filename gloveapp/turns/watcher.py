"""The watcher: beside an engine's running turns, it hands them the prompt answers and stop
requests any server process stored (on PostgreSQL as soon as a NOTIFY on `TURNS_CHANNEL`
says so, on a SQLite file as soon as a local wake-up does (`gloveapp.lib.wake`), rechecking
every GLOVE_TURN_ANSWER_RECHECK_SECONDS; elsewhere every GLOVE_TURN_POLL_SECONDS; idle, it
sleeps), renews their leases, and takes back turns whose worker died (another worker's lease
ran out) to run them again. It also tells the engine's fetcher a task was enqueued."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.conf import settings

from gloveapp.approvals.services import decisions_for_turns
from gloveapp.lib.db.outages import Backoff, close_broken_connections
from gloveapp.lib.wake import TURNS as WAKE_TURNS
from gloveapp.lib.wake import WakeListener
from gloveapp.live.relay import listen_params, listen_postgres
from gloveapp.turns.announcer import dismiss
from gloveapp.turns.leases import sessions_waiting, turns_heartbeat, turns_take_back
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.running import RunningTurn, waits
from gloveapp.turns.slots import is_dismissal
from gloveapp.turns.wakeups import TASK_ENQUEUED, TURNS_CHANNEL

logger = logging.getLogger(__name__)

# How often a worker looks for stop requests of its running turns.
CANCEL_CHECK_SECONDS = 0.25


class WatchedEngine(Protocol):
    """What the watcher reads of the engine it watches over."""

    running: dict[int, RunningTurn]
    worker_id: str
    requeue: Callable[[str], bool]

    @property
    def stopping(self) -> bool: ...


class TurnWatcher:
    """The watcher of one engine's running turns (one per engine, on the engine's loop)."""

    def __init__(self, engine: WatchedEngine) -> None:
        self.engine = engine
        # PostgreSQL (or a SQLite file's local wake-ups): the LISTEN connection is up
        # (answers and stops arrive by NOTIFY), and the turns notified since it last looked.
        self.listening = False
        self._notified: set[int] = set()
        self._nudge: asyncio.Event | None = None
        # Set when a task was enqueued on the database queue (NOTIFY), so the fetcher takes
        # it at once instead of at its next poll.
        self._task_enqueued: asyncio.Event | None = None

    def nudge(self) -> None:
        """Look now (a turn started): the idle watcher sleeps until the next sweep."""
        self._nudge_event().set()

    def notify(self, turn_id: int) -> None:
        """Something the running turn waits on may be stored: hand it over at the next look."""
        self._notified.add(turn_id)
        self._nudge_event().set()

    async def watch(self) -> None:
        lease = settings.GLOVE_TURN_LEASE_SECONDS
        next_heartbeat = next_sweep = next_cancel_check = next_answer_check = 0.0
        nudge = self._nudge_event()
        backoff = Backoff("turn watcher")
        pause = 0.0
        while not self.engine.stopping:
            # Idle (no running turn) there is nothing to deliver or renew: it sleeps until
            # nudged (a turn starts, an answer is notified) or the next sweep is due.
            timeout = (
                settings.GLOVE_TURN_POLL_SECONDS
                if self.engine.running
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
                if self.engine.running:
                    # Answers: when notified (PostgreSQL), else on every poll; and, as a
                    # safety net for a lost notification, every ANSWER_RECHECK seconds.
                    answers_too = (
                        not self.listening
                        or bool(notified & self.engine.running.keys())
                        or now >= next_answer_check
                    )
                    if answers_too:
                        next_answer_check = now + settings.GLOVE_TURN_ANSWER_RECHECK_SECONDS
                    cancels_too = now >= next_cancel_check or bool(
                        notified & self.engine.running.keys()
                    )
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
            self._notified.update(self.engine.running)
            nudge.set()

        def lost() -> None:
            self.listening = False

        await listen_postgres(
            TURNS_CHANNEL,
            params=await sync_to_async(listen_params)(),
            on_connect=connected,
            on_notify=self.notified_of,
            on_lost=lost,
            label="turns",
        )

    def notified_of(self, payload: str) -> None:
        """A NOTIFY (PostgreSQL) or a local wake-up (SQLite): a task was enqueued, or a
        running turn has an answer or a stop waiting."""
        if payload == TASK_ENQUEUED:
            self._task_event().set()
            return
        with contextlib.suppress(ValueError):
            self._notified.add(int(payload))
        self._nudge_event().set()

    def wake_locally(self) -> WakeListener | None:
        """SQLite: wake-ups from the processes of this machine (`gloveapp.lib.wake`) stand for
        NOTIFY, so an idle worker waits instead of polling every GLOVE_TURN_POLL_SECONDS."""
        listener = WakeListener(WAKE_TURNS, self.notified_of)
        if not listener.start():
            return None
        self.listening = True
        return listener

    async def _deliver_answers_and_cancels(
        self, *, answers_too: bool = True, cancels_too: bool
    ) -> None:
        # Answers only for turns that wait on a prompt; stop requests less often.
        waiting = (
            [turn_id for turn_id, state in self.engine.running.items() if waits(state)]
            if answers_too
            else []
        )
        ids = list(self.engine.running) if cancels_too else []
        if not waiting and not ids:
            return
        answers, cancels = await sync_to_async(_answers_and_cancels)(
            waiting, ids, self.engine.worker_id
        )
        for turn_id, slot_id, answer in answers:
            state = self.engine.running.get(turn_id)
            if state is not None and state.display.is_waiting(slot_id):
                if is_dismissal(answer):
                    dismiss(state.display, slot_id)
                else:
                    state.display.resolve(slot_id, (answer or {}).get("value"))
        for turn_id in cancels:
            state = self.engine.running.get(turn_id)
            if state is not None and not state.abort.signal.aborted:
                state.abort.abort("cancelled")

    async def _heartbeat(self) -> None:
        if not self.engine.running:
            return
        ids = list(self.engine.running)
        held = await sync_to_async(turns_heartbeat)(turn_ids=ids, worker_id=self.engine.worker_id)
        for turn_id in set(ids) - held:
            state = self.engine.running.get(turn_id)
            if state is not None:
                # Taken back by another worker (this one stalled past its lease): stop here,
                # the other one runs it now.
                logger.warning("lost the lease of turn %s; stopping it", turn_id)
                state.abort.abort("lease lost")

    async def _sweep(self) -> None:
        sessions = await sync_to_async(turns_take_back)()
        lost = await sync_to_async(sessions_waiting)(
            older_than=timedelta(seconds=settings.GLOVE_TURN_LEASE_SECONDS)
        )
        for session_id in {*sessions, *lost}:
            # Through the backend, so any worker (not only this one) may take it.
            await sync_to_async(self.engine.requeue)(session_id)


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
