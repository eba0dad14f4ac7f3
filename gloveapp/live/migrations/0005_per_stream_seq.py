# Event numbers per stream: `LiveEvent.seq` (1, 2, 3... in each stream) is what clients see,
# and `LiveStreamCounter` holds each stream's last one. Existing rows are numbered in id
# order within their stream, and the counters start from there. On PostgreSQL the column
# and the index are added to the partitioned table, so every day's partition has them.

from django.db import migrations, models

EVENTS = "conversations_liveevent"
COUNTERS = "live_livestreamcounter"


def backfill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {EVENTS} SET seq = numbered.n FROM ("
            f" SELECT id, row_number() OVER (PARTITION BY stream ORDER BY id) AS n FROM {EVENTS}"
            f") numbered WHERE {EVENTS}.id = numbered.id"
        )
        cursor.execute(
            f"INSERT INTO {COUNTERS} (stream, last_seq) SELECT stream, max(seq) FROM {EVENTS}"
            " GROUP BY stream"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("live", "0004_admin_filter_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="LiveStreamCounter",
            fields=[
                ("stream", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("last_seq", models.BigIntegerField()),
            ],
        ),
        migrations.AddField(
            model_name="liveevent",
            name="seq",
            field=models.BigIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name="liveevent",
            index=models.Index(fields=["stream", "seq"], name="liveevent_stream_seq_idx"),
        ),
    ]
