"""Turns with their slots, steps, webhooks and pushes; mesh peers; each session's usage per
model; the usage page's days.

The turns table has no index on `lease_until` (a heartbeat is a HOT update) and none of its
foreign keys' own (the indexes that lead with them serve their lookups); on PostgreSQL it
leaves a fifth of each page free (fillfactor 80) for those updates' new row versions.

The database queue's task results (django-tasks-db's table) are partitioned by day of
`enqueued_at` on PostgreSQL (gloveapp/lib/db/partitions.py): retention drops a whole day once
every task in it finished before the cut; a day holding a queued or running task loses its
finished rows in batches instead. The table is django-tasks-db's: this depends on its last
migration, and `gloveapp.turns.checks` fails when the package's schema moves on (a new
migration of its own, a field this table lacks). Its indexes, the claim query's partial
index included, are recreated on the partitioned table; its key becomes (id, enqueued_at)
(ids are UUID4s, unique without a constraint across days). SQLite keeps the plain table.
Its admin's list, newest first, and its filters by status and by queue have indexes of
their own, outside the models' state (the model is the package's, and `turns/checks.py`
compares its declared indexes, which these are not).

The admin's filters on turns (`?source=api`, `?retried=yes`...) and a long chat's stopped
or failed turns whose note its page shows, each one range of an index of its own. These
and the task results' are built with `CREATE INDEX IF NOT EXISTS` on PostgreSQL: each may
be built beforehand with CREATE INDEX CONCURRENTLY under the same name
(docs/howto/deploy.md).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from gloveapp.lib.db.migrations import RunPython, add_index_if_absent, partition_by_day

TURN_FILLFACTOR = 80

TASK_RESULT_INDEXES = {
    "glove_task_result_enqueued_idx": '"enqueued_at" DESC',
    "glove_task_result_status_idx": '"status", "enqueued_at" DESC',
    "glove_task_result_queue_idx": '"queue_name", "enqueued_at" DESC',
}


def set_turn_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE turns_turn SET (fillfactor = {TURN_FILLFACTOR})")


def reset_turn_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE turns_turn RESET (fillfactor)")


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

    initial = True

    dependencies = [
        ('conversations', '0001_initial'),
        ('versions', '0001_initial'),
        ('django_tasks_database', '0021_conditional_partial_index_ordering'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Turn',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('text', models.TextField()),
                ('source', models.CharField(default='page', max_length=20)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('waiting', 'Waiting'), ('done', 'Done'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=10)),
                ('attempts', models.PositiveSmallIntegerField(default=0)),
                ('worker_id', models.CharField(blank=True, default='', max_length=64)),
                ('lease_until', models.DateTimeField(blank=True, null=True)),
                ('base_seq', models.PositiveIntegerField(blank=True, null=True)),
                ('cancel_requested', models.BooleanField(default=False)),
                ('error', models.TextField(blank=True, default='')),
                ('task_id', models.CharField(blank=True, default='', max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='turns', to='conversations.session')),
                ('user', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                ('notice', models.TextField(blank=True, default='')),
                ('end_seq', models.PositiveIntegerField(blank=True, null=True)),
                ('stopped_at', models.DateTimeField(blank=True, null=True)),
                ('stopped_by', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('resumes', models.PositiveSmallIntegerField(default=0)),
                ('cache_read_tokens', models.BigIntegerField(default=0)),
                ('cache_write_tokens', models.BigIntegerField(default=0)),
                ('model', models.CharField(blank=True, default='', max_length=200)),
                ('tokens_in', models.BigIntegerField(default=0)),
                ('tokens_out', models.BigIntegerField(default=0)),
                ('trace_parent', models.CharField(blank=True, default='', max_length=64)),
                ('restarting', models.BooleanField(default=False)),
                ('agent_version', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='versions.agentversion')),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(fields=['user', 'created_at'], name='turns_turn_user_id_5d8cf2_idx'), models.Index(fields=['session', 'id'], name='turn_session_newest_idx'), models.Index(condition=models.Q(('status__in', ['queued', 'running', 'waiting'])), fields=['session', 'id'], name='turn_session_unfinished_idx'), models.Index(condition=models.Q(('stopped_by__isnull', False)), fields=['stopped_by'], name='turn_stopped_by_idx')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('status', 'running')), fields=('session',), name='one_running_turn_per_session')],
            },
        ),
        migrations.CreateModel(
            name='TurnSlot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slot_id', models.CharField(max_length=64)),
                ('renderer', models.CharField(max_length=100)),
                ('input', models.JSONField(blank=True, null=True)),
                ('tool_name', models.CharField(blank=True, max_length=100, null=True)),
                ('call_id', models.CharField(blank=True, max_length=200, null=True)),
                ('display_strategy', models.CharField(default='stay', max_length=30)),
                ('waits_for_answer', models.BooleanField(default=False)),
                ('template', models.CharField(max_length=200)),
                ('status', models.CharField(choices=[('open', 'Open'), ('answered', 'Answered'), ('resolved', 'Resolved'), ('rejected', 'Rejected'), ('expired', 'Expired')], default='open', max_length=10)),
                ('answer', models.JSONField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='turn_slots', to='conversations.session')),
                ('turn', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='slots', to='turns.turn')),
                ('answered_by', models.CharField(blank=True, default='', max_length=150)),
                ('answered_via', models.CharField(blank=True, default='', max_length=10)),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(fields=['session', 'status'], name='turns_turns_session_794a8c_idx')],
                'constraints': [models.UniqueConstraint(fields=('turn', 'slot_id'), name='one_row_per_turn_slot')],
            },
        ),
        migrations.CreateModel(
            name='MeshPeer',
            fields=[
                ('session', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='mesh_peer', serialize=False, to='conversations.session')),
                ('mesh_id', models.CharField(max_length=128, unique=True)),
                ('transport', models.CharField(default='default', max_length=100)),
                ('name', models.CharField(max_length=200)),
                ('description', models.TextField(blank=True, default='')),
                ('capabilities', models.JSONField(blank=True, null=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.CreateModel(
            name='TurnStep',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('attempt', models.PositiveSmallIntegerField()),
                ('worker_id', models.CharField(blank=True, default='', max_length=64)),
                ('kind', models.CharField(choices=[('attempt', 'Attempt'), ('model', 'Model'), ('tool', 'Tool'), ('wait', 'Wait')], max_length=10)),
                ('name', models.CharField(blank=True, default='', max_length=200)),
                ('started_at', models.DateTimeField()),
                ('duration_ms', models.PositiveIntegerField(blank=True, null=True)),
                ('outcome', models.CharField(blank=True, default='', max_length=20)),
                ('detail', models.JSONField(blank=True, null=True)),
                ('turn', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='turns.turn')),
            ],
            options={
                'ordering': ['turn_id', 'started_at', 'id'],
                'indexes': [models.Index(fields=['turn', 'started_at'], name='turns_turns_turn_id_637848_idx'), models.Index(fields=['started_at'], name='turns_turns_started_5fd697_idx')],
            },
        ),
        migrations.CreateModel(
            name='SessionUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('model', models.CharField(blank=True, default='', max_length=200)),
                ('tokens_in', models.BigIntegerField(default=0)),
                ('tokens_out', models.BigIntegerField(default=0)),
                ('cache_read_tokens', models.BigIntegerField(default=0)),
                ('cache_write_tokens', models.BigIntegerField(default=0)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.session')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('session', 'model'), name='session_usage_per_model')],
            },
        ),
        migrations.CreateModel(
            name='TurnWebhook',
            fields=[
                ('turn', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='webhook', serialize=False, to='turns.turn')),
                ('kind', models.CharField(choices=[('glove', 'Glove'), ('a2a', 'A2A')], default='glove', max_length=5)),
                ('url', models.URLField(max_length=2000)),
                ('config_id', models.CharField(blank=True, default='', max_length=100)),
                ('token', models.CharField(blank=True, default='', max_length=500)),
                ('status', models.CharField(choices=[('waiting', 'Waiting'), ('pending', 'Pending'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed')], default='waiting', max_length=8)),
                ('outcome', models.CharField(blank=True, default='', max_length=10)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('attempts', models.PositiveSmallIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('claimed_until', models.DateTimeField(blank=True, null=True)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True, default='')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('status__in', ['pending', 'sending'])), fields=['next_attempt_at'], name='turn_webhook_due_idx')],
            },
        ),
        migrations.CreateModel(
            name='UsageDay',
            fields=[
                ('day', models.DateField(primary_key=True, serialize=False)),
                ('summary', models.JSONField()),
                ('steps', models.PositiveIntegerField(default=0)),
                ('computed_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['day'],
            },
        ),
        migrations.CreateModel(
            name='TurnPush',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.CharField(max_length=100)),
                ('state', models.CharField(max_length=40)),
                ('happened_at', models.DateTimeField()),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed')], default='pending', max_length=8)),
                ('attempts', models.PositiveSmallIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('claimed_until', models.DateTimeField(blank=True, null=True)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True, default='')),
                ('turn', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='pushes', to='turns.turn')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('status__in', ['pending', 'sending'])), fields=['next_attempt_at'], name='turn_push_due_idx')],
                'constraints': [models.UniqueConstraint(fields=('turn', 'event'), name='turn_push_once_per_event')],
            },
        ),
        RunPython(set_turn_fillfactor, reset_turn_fillfactor, elidable=False),
        partition_by_day(table="django_tasks_database_dbtaskresult", column="enqueued_at"),
        RunPython(
            create_task_result_indexes, drop_task_result_indexes, elidable=False
        ),
        add_index_if_absent(
            "turns",
            "turn",
            models.Index(
                condition=models.Q(
                    ("end_seq__isnull", False), ("status__in", ["cancelled", "failed"])
                ),
                fields=["session", "end_seq"],
                name="turn_session_note_idx",
            ),
        ),
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
    ]
