"""Sessions, their messages, permissions, tasks and handoff records, retired session keys,
idempotency keys and kept tool results.

Beyond the models' state, on PostgreSQL:
- the session table leaves 30% of each page free (fillfactor 70): every append rewrites its
  session's row (last_seq, counters, updated_at), and PostgreSQL can do that as a HOT update
  (no index entry, no dead version for the next append to step over) only when the new
  version fits on the same page;
- a trigram index on the title (`pg_trgm`) serves the admin's `%term%` search;
- the idempotency keys are partitioned by day of `created_at`
  (gloveapp/lib/db/partitions.py): retention drops whole days instead of deleting rows. "One
  answer per user and key" stays: a unique index per day, and across days the advisory lock
  every writer takes on the key (`conversations.idempotency._claim`). SQLite keeps the plain
  table and its constraint.

`Message.agent_version` comes in 0002: the versions app's tables refer to sessions.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from gloveapp.lib.db.migrations import (
    RunPython,
    add_index_if_absent,
    partition_by_day,
    trigram_index_operations,
)

SESSION_FILLFACTOR = 70


def set_session_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"ALTER TABLE conversations_session SET (fillfactor = {SESSION_FILLFACTOR})"
        )


def reset_session_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE conversations_session RESET (fillfactor)")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Session',
            fields=[
                ('id', models.CharField(max_length=128, primary_key=True, serialize=False)),
                ('title', models.CharField(blank=True, default='', max_length=200)),
                ('agent_name', models.CharField(blank=True, default='', max_length=100)),
                ('token_count', models.BigIntegerField(default=0)),
                ('turn_count', models.IntegerField(default=0)),
                ('tokens_in_total', models.BigIntegerField(default=0)),
                ('tokens_out_total', models.BigIntegerField(default=0)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('owner', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='glove_sessions', to=settings.AUTH_USER_MODEL)),
                ('cache_creation_input_tokens_total', models.BigIntegerField(default=0)),
                ('cache_read_input_tokens_total', models.BigIntegerField(default=0)),
                ('last_seq', models.PositiveIntegerField(default=0, editable=False)),
                ('key', models.CharField(max_length=128)),
                ('parent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='children', to='conversations.session')),
                ('parent_call_id', models.CharField(blank=True, default='', max_length=200)),
                ('person_message_count', models.PositiveIntegerField(default=0, editable=False)),
                ('answerer', models.CharField(choices=[('agent', 'the agent'), ('queued', 'waiting for a person'), ('person', 'a person'), ('closed', 'closed')], default='agent', editable=False, max_length=8)),
                ('answerer_group', models.CharField(blank=True, default='', editable=False, max_length=150)),
                ('answerer_person', models.ForeignKey(blank=True, db_index=False, editable=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('answerer_since', models.DateTimeField(blank=True, editable=False, null=True)),
                ('answerer_turn_id', models.BigIntegerField(blank=True, editable=False, null=True)),
                ('handoff_from_seq', models.PositiveIntegerField(blank=True, editable=False, null=True)),
                ('queue_told_at', models.DateTimeField(blank=True, editable=False, null=True)),
            ],
            options={
                'ordering': ['-updated_at'],
                'indexes': [models.Index(fields=['owner', '-created_at', '-key'], name='session_owner_created_idx'), models.Index(fields=['created_at', 'id'], name='session_created_idx'), models.Index(fields=['agent_name', 'created_at'], name='session_agent_created_idx'), models.Index(condition=models.Q(('answerer', 'queued')), fields=['answerer_group', 'answerer_since', 'id'], name='session_queued_idx'), models.Index(condition=models.Q(('answerer', 'person')), fields=['answerer_person', 'answerer_since', 'id'], name='session_person_idx'), models.Index(condition=models.Q(('answerer', 'queued'), ('queue_told_at__isnull', True)), fields=['agent_name', 'answerer_since'], name='session_queue_untold_idx')],
                'constraints': [models.UniqueConstraint(fields=('owner', 'key'), name='session_unique_owner_key'), models.CheckConstraint(condition=models.Q(('key', ''), _negated=True), name='session_key_not_empty'), models.UniqueConstraint(condition=models.Q(('parent__isnull', False)), fields=('parent', 'parent_call_id'), name='session_one_child_per_call')],
            },
        ),
        migrations.CreateModel(
            name='Message',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveIntegerField()),
                ('sender', models.CharField(choices=[('user', 'user'), ('agent', 'agent')], max_length=5)),
                ('msg_id', models.CharField(blank=True, max_length=200, null=True)),
                ('text', models.TextField(blank=True, default='')),
                ('content', models.JSONField(blank=True, null=True)),
                ('tool_calls', models.JSONField(blank=True, null=True)),
                ('tool_results', models.JSONField(blank=True, null=True)),
                ('is_compaction', models.BooleanField(default=False)),
                ('is_skill_injection', models.BooleanField(default=False)),
                ('framework_context', models.CharField(blank=True, max_length=50, null=True)),
                ('reasoning_content', models.TextField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='conversations.session')),
                ('extra', models.JSONField(blank=True, null=True)),
                ('wire', models.TextField(blank=True, editable=False, null=True)),
            ],
            options={
                'ordering': ['session', 'seq'],
                'indexes': [models.Index(condition=models.Q(('is_compaction', True)), fields=['session', '-seq'], name='message_compaction_idx')],
                'constraints': [models.UniqueConstraint(fields=('session', 'seq'), name='message_unique_seq')],
            },
        ),
        migrations.CreateModel(
            name='Permission',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.TextField()),
                ('tool_name', models.CharField(max_length=200)),
                ('status', models.CharField(choices=[('granted', 'granted'), ('denied', 'denied'), ('unset', 'unset')], default='unset', max_length=10)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='permissions', to='conversations.session')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('session', 'key'), name='permission_unique_key')],
            },
        ),
        migrations.CreateModel(
            name='Task',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('task_id', models.CharField(max_length=200)),
                ('position', models.PositiveIntegerField(default=0)),
                ('content', models.TextField()),
                ('active_form', models.TextField(blank=True, default='')),
                ('status', models.CharField(choices=[('pending', 'pending'), ('in_progress', 'in progress'), ('completed', 'completed')], default='pending', max_length=20)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tasks', to='conversations.session')),
            ],
            options={
                'ordering': ['session', 'position'],
                'constraints': [models.UniqueConstraint(fields=('session', 'task_id'), name='task_unique_id')],
            },
        ),
        migrations.CreateModel(
            name='RetiredSessionKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=128)),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('owner', 'key'), name='retired_session_key_unique')],
            },
        ),
        migrations.CreateModel(
            name='IdempotentRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=200)),
                ('scope', models.CharField(max_length=300)),
                ('fingerprint', models.CharField(max_length=64)),
                ('answer', models.JSONField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('user', 'key'), name='one_request_per_idempotency_key')],
            },
        ),
        migrations.CreateModel(
            name='KeptToolResult',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('call_id', models.CharField(max_length=200)),
                ('tool_name', models.CharField(max_length=200)),
                ('size', models.PositiveBigIntegerField()),
                ('content', models.BinaryField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.session')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('session', 'call_id'), name='kept_tool_result_unique_call')],
            },
        ),
        migrations.CreateModel(
            name='HandoffRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('requested', 'asked for a person'), ('claimed', 'claimed'), ('taken_over', 'taken over'), ('handed_back', 'handed back'), ('closed', 'closed'), ('note', 'internal note'), ('overdue', 'nobody answered in time')], max_length=12)),
                ('from_state', models.CharField(blank=True, default='', max_length=8)),
                ('to_state', models.CharField(blank=True, default='', max_length=8)),
                ('actor_label', models.CharField(blank=True, default='', max_length=150)),
                ('via', models.CharField(blank=True, default='', max_length=20)),
                ('group', models.CharField(blank=True, default='', max_length=150)),
                ('reason', models.TextField(blank=True, default='')),
                ('text', models.TextField(blank=True, default='')),
                ('from_seq', models.PositiveIntegerField(blank=True, null=True)),
                ('to_seq', models.PositiveIntegerField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='handoff_records', to='conversations.session')),
            ],
            options={
                'ordering': ['session', 'id'],
                'indexes': [models.Index(fields=['session', 'id'], name='handoff_record_session_idx'), models.Index(fields=['created_at'], name='handoff_record_created_idx')],
            },
        ),
        RunPython(set_session_fillfactor, reset_session_fillfactor, elidable=False),
        *trigram_index_operations(
            table="conversations_session", column="title", name="session_title_trgm_idx"
        ),
        partition_by_day(
            table="conversations_idempotentrequest",
            column="created_at",
            unique=(("one_request_per_idempotency_key", ("user_id", "key")),),
        ),
        # The admin's filter on child sessions, in the list's order (a partial index over
        # the rare rows). `CREATE INDEX IF NOT EXISTS` on PostgreSQL: it may be built
        # beforehand with CREATE INDEX CONCURRENTLY under the same name
        # (docs/howto/deploy.md).
        add_index_if_absent(
            "conversations",
            "session",
            models.Index(
                condition=models.Q(("parent__isnull", False)),
                fields=["created_at", "id"],
                name="session_child_created_idx",
            ),
        ),
    ]
