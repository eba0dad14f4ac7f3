# The admin's filters, each value one range of an index of its own (a composite index on
# the filtered column then the list's order, or a partial index over the rare rows): without
# them a rare value (`?source=api`, `?retried=yes`) walked every turn in the list's order to
# fill a page (bench/scale.py at 10M: 58 ms -> 1.2 s). And django-tasks-db's table
# (partitioned by `turns/0008`): its admin's list, newest first, and its filters by status
# and by queue; those are outside the models' state (the model is the package's, and
# `turns/checks.py` compares its declared indexes, which these are not).
# `CREATE INDEX IF NOT EXISTS`: on a large table, build them beforehand with CREATE INDEX
# CONCURRENTLY under the same names (docs/howto/deploy.md).

from django.conf import settings
from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent

TASK_RESULT_INDEXES = {
    "glove_task_result_enqueued_idx": '"enqueued_at" DESC',
    "glove_task_result_status_idx": '"status", "enqueued_at" DESC',
    "glove_task_result_queue_idx": '"queue_name", "enqueued_at" DESC',
}


def create_task_result_indexes(apps, schema_editor):
    for name, columns in TASK_RESULT_INDEXES.items():
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON "django_tasks_database_dbtaskresult" '
            f"({columns})"
        )


def drop_task_result_indexes(apps, schema_editor):
    for name in TASK_RESULT_INDEXES:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("turns", "0013_turn_agent_version"),
        ("turns", "0008_partition_task_results"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        add_index_if_absent(
            "turns",
            "turn",
            models.Index(
                condition=models.Q(("status__in", ["done", "failed", "cancelled"])),
                fields=["status", "id"],
                name="turn_status_idx",
            ),
        ),
        add_index_if_absent(
            "turns", "turn", models.Index(fields=["source", "id"], name="turn_source_idx")
        ),
        add_index_if_absent(
            "turns",
            "turn",
            models.Index(
                condition=models.Q(("attempts__gt", 1)), fields=["id"], name="turn_retried_idx"
            ),
        ),
        migrations.RunPython(
            create_task_result_indexes, drop_task_result_indexes, elidable=False
        ),
    ]
