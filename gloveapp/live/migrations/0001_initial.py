"""The live event log and each stream's last event number, and the database cache's table.

On PostgreSQL the event log is partitioned by day of `created_at`
(gloveapp/lib/db/partitions.py): retention drops whole days instead of deleting rows. SQLite
keeps the plain table. The table and its first index keep the names they had when the model
lived in the conversations app.
"""

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations, models

from gloveapp.lib.db.migrations import RunPython, add_index_if_absent, partition_by_day

# The database cache's table (`glove_cache`), where every process counts its rate limits when
# no Redis is configured (gloveapp/live/cache.py). Made whatever CACHES says now, so a later
# switch from Redis to the database finds it; `createcachetable` skips an existing table.
CACHE_TABLE = "glove_cache"


def create_cache_table(apps, schema_editor):
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, CACHE_TABLE, dry_run=False)


def drop_cache_table(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(CACHE_TABLE)}")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
    ]

    operations = [
        migrations.CreateModel(
            name='LiveEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stream', models.CharField(max_length=200)),
                ('type', models.CharField(max_length=100)),
                ('payload', models.JSONField(default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('seq', models.BigIntegerField()),
            ],
            options={
                'db_table': 'conversations_liveevent',
                'ordering': ['id'],
                'indexes': [models.Index(fields=['stream', 'id'], name='conversatio_stream_b5fa2a_idx'), models.Index(fields=['stream', 'seq'], name='liveevent_stream_seq_idx')],
            },
        ),
        migrations.CreateModel(
            name='LiveStreamCounter',
            fields=[
                ('stream', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('last_seq', models.BigIntegerField()),
            ],
        ),
        RunPython(create_cache_table, drop_cache_table, elidable=False),
        partition_by_day(table="conversations_liveevent", column="created_at"),
        add_index_if_absent(
            "live", "liveevent", models.Index(fields=["type", "id"], name="liveevent_type_idx")
        ),
    ]
