"""Retention: how long each growing table keeps its rows, applied by the turn worker.

Every table that grows with use declares here how long it keeps a row (a `GLOVE_RETAIN_*`
setting, in days; `0` keeps them forever) and the one function that forgets older rows. The
turn worker's scheduler (`scheduler.TurnScheduler.schedule`) calls `retention_apply` every
GLOVE_RETENTION_SECONDS, so no cron line is needed; the `prune_*` management commands are
the same functions by hand.

On PostgreSQL the append-only logs are partitioned by day (`gloveapp.lib.db.partitions`): each
round first creates the partitions of the coming days, then the prunes drop whole expired
days. Other tables lose their old rows in bounded batches (`gloveapp.lib.db.batches.delete_in_batches`).
Several workers may run it at once, harmlessly: a batch another worker deleted first deletes
nothing, a partition is made under a transaction-level advisory lock (safe behind a
transaction-pooling PgBouncer, where a session-level lock would leak) and dropped `IF EXISTS`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from gloveapp.approvals.services import approvals_prune
from gloveapp.budgets.services import budget_ledger_prune
from gloveapp.conversations.idempotency import idempotency_keys_prune
from gloveapp.lib.db import partitions
from gloveapp.lib.db.batches import Stopped, delete_in_batches
from gloveapp.lib.db.outages import is_database_outage
from gloveapp.lib.logins import login_records_prune
from gloveapp.live.eventlog import live_events_prune
from gloveapp.turns.lifecycle import turns_prune
from gloveapp.turns.steps import turn_steps_prune
from inbox.services import inbox_items_prune
from mesh.services import mesh_prune

logger = logging.getLogger(__name__)


def task_results_prune(*, older_than: timedelta) -> int:
    """Forget the database queue's finished task results (django-tasks-db's `DBTaskResult`)
    that finished more than `older_than` ago; queued and running tasks stay, whatever their
    age. On PostgreSQL the table is partitioned by day of `enqueued_at` (`turns/0001`): a
    day whose every task finished before the cut is dropped whole; a day still holding a
    queued or running task (or one that finished after the cut) keeps it and loses its
    other rows in batches. Elsewhere rows go in bounded batches."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    cut = timezone.now() - older_than
    finished = [TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED]
    table = DBTaskResult._meta.db_table
    if partitions.is_partitioned(table):
        return partitions.partitions_prune(
            table,
            column="enqueued_at",
            cut=cut,
            batch=settings.GLOVE_RETENTION_BATCH,
            keep="status NOT IN (%s, %s) OR finished_at IS NULL OR finished_at >= %s",
            keep_params=[*finished, cut],
        )
    return delete_in_batches(
        DBTaskResult.objects.filter(
            status__in=finished,
            finished_at__lt=cut,
        )
    )


def _mesh_prune(*, older_than: timedelta) -> int:
    return sum(mesh_prune(older_than=older_than).values())


@dataclass(frozen=True)
class Retention:
    """One growing table (or family of tables) and how long it keeps a row."""

    name: str
    setting: str
    prune: Callable[..., int]


RETENTION: tuple[Retention, ...] = (
    Retention("live events", "GLOVE_RETAIN_LIVE_EVENTS_DAYS", live_events_prune),
    Retention("idempotency keys", "GLOVE_RETAIN_IDEMPOTENCY_KEYS_DAYS", idempotency_keys_prune),
    Retention("task results", "GLOVE_RETAIN_TASK_RESULTS_DAYS", task_results_prune),
    Retention("mesh records", "GLOVE_RETAIN_MESH_DAYS", _mesh_prune),
    Retention("consumed inbox items", "GLOVE_RETAIN_INBOX_CONSUMED_DAYS", inbox_items_prune),
    Retention("decided approvals", "GLOVE_RETAIN_APPROVALS_DAYS", approvals_prune),
    Retention("finished turns", "GLOVE_RETAIN_TURNS_DAYS", turns_prune),
    Retention("turn timeline steps", "GLOVE_RETAIN_TURN_STEPS_DAYS", turn_steps_prune),
    Retention("budget ledger", "GLOVE_RETAIN_BUDGET_LEDGER_DAYS", budget_ledger_prune),
    Retention("login records", "GLOVE_RETAIN_LOGIN_RECORDS_DAYS", login_records_prune),
)


def retention_apply() -> dict[str, int]:
    """One round: the coming days' partitions (of every table in `partitions.LOGS`), then
    every table's prune; returns the rows each forgot (what dropped partitions held is
    estimated)."""
    for log in partitions.LOGS:
        try:
            partitions.partitions_ensure(log.table, column=log.column, now=timezone.now())
        except Stopped:
            raise
        except Exception as error:
            if is_database_outage(error):
                raise
            # Days are made three days ahead: a round that fails here (a lock timeout on
            # a busy table) is tried again long before its day comes, and the other
            # tables still get theirs.
            logger.exception("partitions of %s not made; tried again next round", log.table)
    pruned: dict[str, int] = {}
    for policy in RETENTION:
        days = getattr(settings, policy.setting)
        if not days or days <= 0:
            continue
        try:
            pruned[policy.name] = policy.prune(older_than=timedelta(days=days))
        except Stopped:
            raise  # the worker is stopping: the next round goes on
        except Exception as error:
            if is_database_outage(error):
                raise
            # One table's failure (a lock timeout on a busy log) must not keep the others
            # from their retention; the next round tries again.
            logger.exception("retention of %s failed; it runs again next round", policy.name)
    forgotten = {name: rows for name, rows in pruned.items() if rows}
    if forgotten:
        logger.info("retention: %s", ", ".join(f"{n} {name}" for name, n in forgotten.items()))
    return pruned
