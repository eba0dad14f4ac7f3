"""System check glove.E030: django-tasks-db's schema is still the one `turns/0001` partitioned.

The database queue's table (`django_tasks_database_dbtaskresult`) belongs to django-tasks-db,
but on PostgreSQL a migration of ours makes it partitioned by day (`turns/0001`, see
docs/explanation/retention.md). A later release of the package whose migration alters the
table (its key, an index, a column) would run against a table it did not make: this check
fails as soon as the installed package has a migration after the one turns/0001 was written
against, or its model's columns, indexes or constraints differ from those turns/0001 kept. Review
the change on a partitioned table (a new column or index works as on any table; a new key
needs the table partitioned again), then update the constants below.
"""

from __future__ import annotations

import pkgutil
import re
from collections.abc import Iterable

from django.core.checks import Error, register

# django-tasks-db's last migration when turns/0001 partitioned its table.
PARTITIONED_AFTER = "0021_conditional_partial_index_ordering"
COLUMNS = frozenset(
    {
        "args_kwargs",
        "backend_name",
        "enqueued_at",
        "exception_class_path",
        "finished_at",
        "id",
        "priority",
        "queue_name",
        "return_value",
        "run_after",
        "started_at",
        "status",
        "task_path",
        "traceback",
        "worker_ids",
    }
)
INDEXES = frozenset(
    {
        "django_task_backend_071754_idx",
        "django_task_queue_n_99c321_idx",
        "tasks_db_new_ordering_idx",
    }
)
CONSTRAINTS = frozenset({"priority_range"})
_MIGRATION = re.compile(r"^\d{4}_\w+$")


def task_results_schema_errors(
    migrations: Iterable[str],
    columns: Iterable[str],
    indexes: Iterable[str],
    constraints: Iterable[str],
) -> list[Error]:
    hint = (
        "turns/0001 partitioned django-tasks-db's table as of its migration "
        f"{PARTITIONED_AFTER}. Check the change against the partitioned table on PostgreSQL "
        "(docs/explanation/retention.md), then update gloveapp/turns/checks.py."
    )
    errors = []
    newer = sorted(
        name for name in migrations if _MIGRATION.match(name) and name > PARTITIONED_AFTER
    )
    if newer:
        errors.append(
            Error(
                f"django-tasks-db has migrations newer than turns/0001 knows: {', '.join(newer)}.",
                hint=hint,
                id="glove.E030",
            )
        )
    for what, found, expected in (
        ("columns", set(columns), COLUMNS),
        ("indexes", set(indexes), INDEXES),
        ("constraints", set(constraints), CONSTRAINTS),
    ):
        if found != expected:
            added, gone = sorted(found - expected), sorted(expected - found)
            errors.append(
                Error(
                    f"django-tasks-db's task result {what} changed (new: {added or 'none'}; "
                    f"gone: {gone or 'none'}).",
                    hint=hint,
                    id="glove.E030",
                )
            )
    return errors


@register("glove")
def check_task_results_schema(app_configs, **kwargs):
    import django_tasks_db.migrations
    from django_tasks_db.models import DBTaskResult

    meta = DBTaskResult._meta
    return task_results_schema_errors(
        [module.name for module in pkgutil.iter_modules(django_tasks_db.migrations.__path__)],
        [field.column for field in meta.concrete_fields],
        [index.name for index in meta.indexes],
        [constraint.name for constraint in meta.constraints],
    )
