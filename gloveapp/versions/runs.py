"""Replay runs: made once with the conversations they replay, then advanced a batch at a
time (by the command in its own process, or by the task on a worker), each conversation's
result written with the run's counters in one transaction.

A run is resumable and idempotent per conversation: a result is unique per (run, session),
so a batch redone after its worker died (`tasks.replay_runs_resume`) skips what is done,
and a conversation is never counted twice. The recording is only read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from gloveapp.agents.config import AgentSpec, default_agent_name
from gloveapp.conversations.models import Session
from gloveapp.lib.admin import usable
from gloveapp.observe import tracing
from gloveapp.versions.judge import Judged, judge_conversation
from gloveapp.versions.models import AgentPointer, AgentVersion, ReplayResult, ReplayRun
from gloveapp.versions.recording import Recording, TurnOutcome, recordings_of
from gloveapp.versions.replay import (
    UNSEEN_MARK,
    UNSEEN_MODES,
    UNSEEN_SANDBOX,
    replay_conversation,
)
from gloveapp.versions.report import findings_of, parse_checks, side_by_side
from gloveapp.versions.selectors import agent_spec_at

logger = logging.getLogger(__name__)

# Conversations per batch: one task's work, one event loop, one progress step.
BATCH = 50
MAX_CONVERSATIONS = 10_000


def agent_sessions(agent_name: str):
    """The sessions of `agent_name` (a session with no name is the default agent's)."""
    names = [agent_name, ""] if agent_name == default_agent_name() else [agent_name]
    return Session.objects.filter(agent_name__in=names, parent__isnull=True)


def sample_sessions(agent_name: str, size: int, *, seed: int | None = None) -> list[str]:
    """`size` of the agent's conversations at random among its newest (bounded: never the
    whole table), oldest first."""
    newest = list(
        agent_sessions(agent_name)
        .filter(last_seq__gt=0)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)[: max(size * 10, 1000)]
    )
    chosen = random.Random(seed).sample(newest, min(size, len(newest)))
    return sorted(chosen, key=newest.index, reverse=True)


def replay_run_create(
    *,
    version: AgentVersion,
    session_ids: list[str],
    selection: str = "",
    by: Any = None,
    unseen_tools: str = UNSEEN_MARK,
    on_commit: Callable[[int], None] | None = None,
) -> ReplayRun:
    """A run of `version` over these conversations (the agent's own, in this order, each
    once), with the agent's checks as they are now; `unseen_tools`: what a call the
    recording never saw does (`replay.UNSEEN_MODES`); `on_commit(run_id)` after it commits
    (`tasks.replay_run_start` enqueues it there)."""
    if unseen_tools not in UNSEEN_MODES:
        raise ValueError(f"unseen_tools must be one of {', '.join(UNSEEN_MODES)}")
    wanted = [session_id for session_id in dict.fromkeys(session_ids) if usable(str(session_id))][
        :MAX_CONVERSATIONS
    ]
    known = set(
        agent_sessions(version.agent_name).filter(pk__in=wanted).values_list("pk", flat=True)
    )
    chosen = [session_id for session_id in wanted if session_id in known]
    if not chosen:
        raise ValueError(f"none of these conversations is one of {version.agent_name}'s")
    checks_text = (
        AgentPointer.objects.filter(agent_name=version.agent_name)
        .values_list("checks", flat=True)
        .first()
    )
    with transaction.atomic():
        run = ReplayRun.objects.create(
            version=version,
            selection=selection[:500],
            session_ids=chosen,
            checks=parse_checks(checks_text or ""),
            total=len(chosen),
            unseen_tools=unseen_tools,
            started_by=by if getattr(by, "pk", None) else None,
            trace_parent=tracing.current_traceparent(),
        )
        if on_commit is not None:
            transaction.on_commit(lambda: on_commit(run.pk))
    return run


def replay_run_advance(run_id: int, *, limit: int = BATCH) -> bool:
    """Replay up to `limit` of the run's conversations not done yet; True while some
    remain. Finishes the run when none does."""
    run = ReplayRun.objects.select_related("version").get(pk=run_id)
    if run.status in (ReplayRun.Status.DONE, ReplayRun.Status.FAILED):
        return False
    done = set(ReplayResult.objects.filter(run=run).values_list("session_id", flat=True))
    pending = [session_id for session_id in run.session_ids if session_id not in done]
    if not pending:
        _finish(run)
        return False
    ReplayRun.objects.filter(pk=run.pk, status=ReplayRun.Status.QUEUED).update(
        status=ReplayRun.Status.RUNNING, progressed_at=timezone.now()
    )
    batch = pending[:limit]
    attributes = {
        "glove.replay.run": run.pk,
        "glove.replay.size": len(batch),
        "gen_ai.agent.name": run.version.agent_name,
    }
    with tracing.span_here("replay.batch", attributes):
        try:
            spec = agent_spec_at(run.version.agent_name, run.version_id)
        except Exception as error:
            ReplayRun.objects.filter(pk=run.pk).update(
                status=ReplayRun.Status.FAILED, error=str(error)[:2000], finished_at=timezone.now()
            )
            return False
        found = recordings_of(batch)
        _replay_and_store(run, batch, [found.get(session_id) for session_id in batch], spec)
    if len(pending) > len(batch):
        return True
    _finish(run)
    return False


def replay_run_execute(
    run_id: int, *, progress: Callable[[ReplayRun], None] | None = None, limit: int = BATCH
) -> ReplayRun:
    """Replay the whole run here, a batch at a time (`progress` told after each)."""
    while replay_run_advance(run_id, limit=limit):
        if progress is not None:
            progress(ReplayRun.objects.get(pk=run_id))
    run = ReplayRun.objects.get(pk=run_id)
    if progress is not None:
        progress(run)
    return run


def replay_runs_stalled(*, now: Any = None) -> list[int]:
    """The runs whose worker stopped mid-way (no progress for GLOVE_REPLAY_STALLED_SECONDS)
    or that were never handed to one, each claimed by moving its progress mark (two sweeps
    at once take a run once)."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.GLOVE_REPLAY_STALLED_SECONDS)
    stalled = ReplayRun.objects.filter(
        status__in=[ReplayRun.Status.QUEUED, ReplayRun.Status.RUNNING], created_at__lt=cutoff
    ).exclude(progressed_at__gte=cutoff)
    claimed = []
    for run_id in stalled.values_list("pk", flat=True)[:100]:
        if (
            ReplayRun.objects.filter(pk=run_id)
            .exclude(progressed_at__gte=cutoff)
            .update(progressed_at=now)
        ):
            claimed.append(run_id)
    return claimed


def _replay_and_store(
    run: ReplayRun, batch: list[str], recordings: list[Recording | None], spec: AgentSpec
) -> None:
    """Replay the batch one conversation after the other on one event loop, storing the
    results replayed so far at least every quarter of GLOVE_REPLAY_STALLED_SECONDS (and at
    the end): a slow model never makes a working run look stalled, and a worker's death
    loses only what it replayed since its last store."""
    every = settings.GLOVE_REPLAY_STALLED_SECONDS / 4
    loop = asyncio.new_event_loop()
    try:
        since = time.monotonic()
        kept: list[tuple[str, Recording | None, Any]] = []
        for session_id, recording in zip(batch, recordings, strict=True):
            if run.unseen_tools == UNSEEN_SANDBOX:
                replayed = _replay_in_sandbox(recording, spec, run.checks or [])
            else:
                # The loop runs only inside this call: the ORM is usable between two.
                replayed = loop.run_until_complete(_replay_one(recording, spec, run.checks or []))
            kept.append((session_id, recording, replayed))
            if time.monotonic() - since >= every:
                _store_results(run, kept)
                kept, since = [], time.monotonic()
        if kept:
            _store_results(run, kept)
    finally:
        # As asyncio.run ends: the adapters' streams left open are closed on this loop.
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@dataclasses.dataclass(slots=True)
class _Replayed:
    """One conversation replayed (or why not), and what its judges said."""

    outcome: list[TurnOutcome] | BaseException | None
    judged: list[Judged] = dataclasses.field(default_factory=list)


def _replay_in_sandbox(recording: Recording | None, spec: AgentSpec, checks: list) -> _Replayed:
    """The conversation replayed inside a transaction (a savepoint inside the caller's)
    that is always rolled back: what the tools it runs write is undone. `async_to_sync`
    hands their ORM calls (`sync_to_async`, thread-sensitive) back to this thread, so they
    run on this connection, inside it. A tool's own connection, thread or HTTP call is
    not sandboxed."""
    with transaction.atomic():
        replayed = async_to_sync(_replay_one)(recording, spec, checks, UNSEEN_SANDBOX)
        transaction.set_rollback(True)
    return replayed


async def _replay_one(
    recording: Recording | None, spec: AgentSpec, checks: list, unseen: str = UNSEEN_MARK
) -> _Replayed:
    if recording is None:
        return _Replayed(None)
    with tracing.child_span("replay.conversation", {"glove.session.id": recording.session_id}):
        try:
            outcome = await replay_conversation(recording, spec, unseen=unseen)
        except Exception as error:  # one conversation's failure is its result, not the run's
            logger.warning("replay of %s failed: %r", recording.session_id, error)
            return _Replayed(error)
        judged = [
            await judge_conversation(check, recording.turns, outcome)
            for check in checks
            if check["kind"] == "judge"
        ]
    return _Replayed(outcome, judged)


def _result_values(
    recording: Recording | None, replayed: _Replayed, checks: list
) -> dict[str, Any]:
    outcome = replayed.outcome
    if recording is None:
        return {"error": "The conversation was deleted.", "diverged": False}
    if isinstance(outcome, BaseException) or outcome is None:
        return {
            "error": f"{type(outcome).__name__}: {outcome}"[:2000],
            "diverged": True,
            "divergence": "replay failed",
        }
    turns, divergence = side_by_side(recording.turns, outcome)
    for judged in replayed.judged:
        for index, verdict in judged.turns.items():
            turns[index].setdefault("judged", []).append(
                {"check": judged.finding["check"], **verdict}
            )
    findings = findings_of(
        checks, outcome, {judged.finding["check"]: judged.finding for judged in replayed.judged}
    )
    costs = [judged.cost for judged in replayed.judged]
    return {
        "turns": turns,
        "diverged": bool(divergence),
        "divergence": divergence,
        "unrecorded_calls": sum(len(turn.unrecorded) for turn in outcome),
        "findings": findings,
        "checks_failed": sum(1 for finding in findings if not finding["passed"]),
        "recorded_tokens": sum(turn.tokens for turn in recording.turns),
        "replayed_tokens": sum(turn.tokens for turn in outcome),
        "judge_tokens": sum(judged.tokens for judged in replayed.judged),
        "judge_cost": None if None in costs else sum(costs, Decimal(0)),
    }


def _store_results(run: ReplayRun, replayed: list[tuple[str, Recording | None, Any]]) -> None:
    """These conversations' results and the run's counters, in one transaction under the
    run's row lock: a batch redone at the same time by another worker (the sweep resumed a
    run whose worker was only slow) finds the results there and adds nothing."""
    batch = [session_id for session_id, _, _ in replayed]
    with transaction.atomic():
        ReplayRun.objects.select_for_update().filter(pk=run.pk).values_list("pk").first()
        done = set(
            ReplayResult.objects.filter(run=run, session_id__in=batch).values_list(
                "session_id", flat=True
            )
        )
        results = [
            ReplayResult(
                run=run, session_id=session_id, **_result_values(rec, out, run.checks or [])
            )
            for session_id, rec, out in replayed
            if session_id not in done
        ]
        ReplayResult.objects.bulk_create(results)
        ReplayRun.objects.filter(pk=run.pk).update(
            done=F("done") + len(results),
            diverged=F("diverged") + sum(1 for result in results if result.diverged),
            failed_checks=F("failed_checks")
            + sum(1 for result in results if result.checks_failed > 0),
            judge_tokens=F("judge_tokens") + sum(result.judge_tokens for result in results),
            judge_cost=F("judge_cost")
            + sum((result.judge_cost or Decimal(0) for result in results), Decimal(0)),
            progressed_at=timezone.now(),
        )


def _finish(run: ReplayRun) -> None:
    ReplayRun.objects.filter(
        pk=run.pk, status__in=[ReplayRun.Status.QUEUED, ReplayRun.Status.RUNNING]
    ).update(status=ReplayRun.Status.DONE, finished_at=timezone.now())
