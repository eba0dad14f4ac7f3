# The idempotency keys become partitioned by day on PostgreSQL (gloveapp/lib/db/partitions.py):
# retention drops whole days instead of deleting rows. "One answer per user and key" stays:
# a unique index per day, and across days the advisory lock every writer takes on the key
# (`conversations.idempotency._claim`). SQLite keeps the plain table and its constraint.
# Reversible: the reverse puts the rows back in a plain table with the unique constraint.

from django.db import migrations

from gloveapp.lib.db.partitions import partition_table, unpartition_table

TABLE = "conversations_idempotentrequest"
UNIQUE = (("one_request_per_idempotency_key", ("user_id", "key")),)


def forwards(apps, schema_editor):
    partition_table(schema_editor, table=TABLE, column="created_at", unique=UNIQUE)


def backwards(apps, schema_editor):
    unpartition_table(schema_editor, table=TABLE, unique=UNIQUE)


class Migration(migrations.Migration):
    atomic = True

    dependencies = [
        ("conversations", "0012_kept_tool_results"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
