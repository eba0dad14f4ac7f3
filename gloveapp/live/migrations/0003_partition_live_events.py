# The live event log becomes partitioned by day on PostgreSQL (gloveapp/lib/db/partitions.py):
# retention drops whole days instead of deleting rows. SQLite keeps the plain table.

from django.db import migrations

from gloveapp.lib.db.partitions import partition_table, unpartition_table

TABLE = "conversations_liveevent"


def forwards(apps, schema_editor):
    partition_table(schema_editor, table=TABLE, column="created_at")


def backwards(apps, schema_editor):
    unpartition_table(schema_editor, table=TABLE)


class Migration(migrations.Migration):
    atomic = True

    dependencies = [
        ("live", "0002_cache_table"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
