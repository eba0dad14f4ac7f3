# The database queue's task results (django-tasks-db's table) become partitioned by day of
# `enqueued_at` on PostgreSQL (gloveapp/lib/db/partitions.py): retention drops a whole day once
# every task in it finished before the cut; a day holding a queued or running task loses
# its finished rows in batches instead. The table is django-tasks-db's: this depends on its
# last migration, and `gloveapp.turns.checks` fails when the package's schema moves on
# (a new migration of its own, a field this table lacks). Its indexes, the claim query's
# partial index included, are recreated on the partitioned table; its key becomes
# (id, enqueued_at) (ids are UUID4s, unique without a constraint across days).
# SQLite keeps the plain table. Reversible: the reverse puts the rows back in a plain table.

from django.db import migrations

from gloveapp.lib.db.partitions import partition_table, unpartition_table

TABLE = "django_tasks_database_dbtaskresult"


def forwards(apps, schema_editor):
    partition_table(schema_editor, table=TABLE, column="enqueued_at")


def backwards(apps, schema_editor):
    unpartition_table(schema_editor, table=TABLE)


class Migration(migrations.Migration):
    atomic = True

    dependencies = [
        ("turns", "0007_turn_usage_steps_trace"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
