"""The turn's timeline: its steps (attempts, model calls, tool calls, waits), stored in
batches inside the turn's fence, the attempt's step closed as it ends, and pruned by age."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from gloveapp.conversations.append import fence_holds
from gloveapp.lib.db.batches import delete_in_batches
from gloveapp.lib.db.prepared import prepared_cursor
from gloveapp.turns.fence import turn_fence
from gloveapp.turns.models import Turn, TurnStep


@dataclass(frozen=True, slots=True)
class StepData:
    """A timeline step not stored yet (a worker keeps a few and stores them together)."""

    kind: str
    name: str
    started_at: Any
    duration_ms: int | None = None
    outcome: str = ""
    detail: dict[str, Any] | None = None


_STEP_TABLE = TurnStep._meta.db_table
_STEP_FIELDS = {field.name: field for field in TurnStep._meta.concrete_fields}
_STEP_BATCH = 200  # rows per INSERT (9 parameters each: within every backend's limit)
_STEP_INSERT = (
    f'INSERT INTO "{_STEP_TABLE}" ("turn_id", "attempt", "worker_id", "kind", "name", '
    '"started_at", "duration_ms", "outcome", "detail") VALUES '
)


def insert_steps(turn_id: int, attempt: int, worker_id: str, steps: list[StepData]) -> None:
    """The rows `TurnStep.objects.bulk_create` would write (of the turn's `attempt`, run by
    `worker_id`), by a plain INSERT: every turn stores its timeline, and compiling the ORM's
    insert cost more than running it (bench/observe_overhead.py)."""
    connection = transaction.get_connection()
    name_length = _STEP_FIELDS["name"].max_length
    outcome_length = _STEP_FIELDS["outcome"].max_length
    started_at, detail = _STEP_FIELDS["started_at"], _STEP_FIELDS["detail"]
    with connection.cursor() as cursor:
        for start in range(0, len(steps), _STEP_BATCH):
            batch = steps[start : start + _STEP_BATCH]
            params: list[Any] = []
            for step in batch:
                params += [
                    turn_id,
                    attempt,
                    worker_id,
                    step.kind,
                    step.name[:name_length],
                    started_at.get_db_prep_save(step.started_at, connection),
                    step.duration_ms,
                    step.outcome[:outcome_length],
                    detail.get_db_prep_save(step.detail, connection),
                ]
            sql = _STEP_INSERT + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(batch))
            cursor.execute(sql, params)


def steps_record(*, turn: Turn, steps: list[StepData]) -> bool:
    """Store steps of `turn`'s timeline in one insert, inside the turn's fence: False
    (nothing written) when this attempt no longer holds the turn."""
    if not steps:
        return True
    with transaction.atomic():
        if not fence_holds(turn_fence(turn)):
            return False
        insert_steps(turn.pk, turn.attempts, turn.worker_id, steps)
    return True


def step_record(
    *,
    turn: Turn,
    kind: str,
    name: str = "",
    started_at: Any,
    duration_ms: int | None = None,
    outcome: str = "",
    detail: dict[str, Any] | None = None,
) -> bool:
    """Store one step of `turn`'s timeline, inside the turn's fence (see `steps_record`)."""
    step = StepData(kind, name, started_at, duration_ms, outcome, detail)
    return steps_record(turn=turn, steps=[step])


def previous_attempt_worker(turn: Turn) -> str:
    """The worker that ran the attempt before this one (from its timeline step), or ""."""
    return (
        TurnStep.objects.filter(
            turn_id=turn.pk, kind=TurnStep.Kind.ATTEMPT, attempt__lt=turn.attempts
        )
        .order_by("-attempt")
        .values_list("worker_id", flat=True)
        .first()
        or ""
    )


_CLOSE_ATTEMPT_SQL = f"""
    UPDATE "{_STEP_TABLE}" SET "duration_ms" = %s, "outcome" = %s
     WHERE "turn_id" = %s AND "attempt" = %s AND "kind" = 'attempt' AND "worker_id" = %s
       AND "duration_ms" IS NULL
"""


def close_attempt_step(
    turn_id: int, attempt: int, worker_id: str, *, started_at: Any, outcome: str
) -> None:
    """The attempt's step (stored with the claim) gets its duration and outcome: one
    statement when the attempt's start is known, else the step is read first."""
    now = timezone.now()
    if started_at is None:
        step = (
            TurnStep.objects.filter(
                turn_id=turn_id,
                kind=TurnStep.Kind.ATTEMPT,
                worker_id=worker_id,
                duration_ms__isnull=True,
            )
            .order_by("-attempt")
            .values_list("attempt", "started_at")
            .first()
        )
        if step is None:
            return
        attempt, started_at = step
    elapsed = max(int((now - started_at).total_seconds() * 1000), 0)
    outcome = outcome[: _STEP_FIELDS["outcome"].max_length]
    with prepared_cursor() as cursor:
        cursor.execute(_CLOSE_ATTEMPT_SQL, [elapsed, outcome, turn_id, attempt, worker_id])


def turn_steps_prune(*, older_than: timedelta) -> int:
    """Forget timeline steps that began more than `older_than` ago, in bounded batches;
    returns how many (GLOVE_RETAIN_TURN_STEPS_DAYS; they also go with their turn)."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    return delete_in_batches(TurnStep.objects.filter(started_at__lt=timezone.now() - older_than))
