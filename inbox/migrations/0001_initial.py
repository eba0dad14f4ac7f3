"""Inbox items, workspaces with their entries, reads and replies, notifications, and the
webhook signatures already used.

Beyond the models' state, on PostgreSQL: a trigram index on an item's request (`pg_trgm`)
for the admin's `%term%` search. The admin's filters, each value one range of an index of
its own (a composite index on the filtered column then the list's order, or a partial index
over the rare rows): without them a rare value walked every row in the list's order to fill
a page. `CREATE INDEX IF NOT EXISTS` on PostgreSQL (`add_index_if_absent`): each may be
built beforehand with CREATE INDEX CONCURRENTLY under the same name (docs/howto/deploy.md).
"""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent, trigram_index_operations


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('conversations', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='InboxItem',
            fields=[
                ('id', models.CharField(max_length=128, primary_key=True, serialize=False)),
                ('tag', models.CharField(max_length=200)),
                ('request', models.TextField()),
                ('response', models.TextField(blank=True, null=True)),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('resolved', 'Resolved'), ('consumed', 'Consumed')], default='pending', max_length=10)),
                ('blocking', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField()),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
                ('consumed_at', models.DateTimeField(blank=True, null=True)),
                ('resolved_by', models.CharField(blank=True, choices=[('user', 'User'), ('webhook', 'Webhook'), ('command', 'Command'), ('api', 'Api'), ('mesh', 'Mesh'), ('expiry', 'Expiry'), ('agent', 'Agent')], max_length=10, null=True)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('resolved_by_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='resolved_inbox_items', to=settings.AUTH_USER_MODEL)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='inbox_items', to='conversations.session')),
                ('key', models.CharField(max_length=128)),
                ('decision', models.CharField(blank=True, max_length=10, null=True)),
                ('decisions', models.JSONField(blank=True, null=True)),
                ('trace_parent', models.CharField(blank=True, default='', max_length=64)),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'indexes': [models.Index(fields=['status', 'created_at'], name='inbox_inbox_status_c18e6a_idx'), models.Index(condition=models.Q(('status', 'pending')), fields=['expires_at'], name='inbox_pending_expiry_idx'), models.Index(fields=['session', 'status', 'created_at', 'key'], name='inbox_session_status_idx'), models.Index(models.Case(models.When(status='pending', then=models.Value(0)), models.When(status='resolved', then=models.Value(1)), default=models.Value(2), output_field=models.IntegerField()), models.OrderBy(models.F('created_at'), descending=True), models.OrderBy(models.F('id'), descending=True), name='inbox_admin_order_idx')],
                'constraints': [models.UniqueConstraint(fields=('session', 'key'), name='inbox_unique_session_key'), models.CheckConstraint(condition=models.Q(('key', ''), _negated=True), name='inbox_key_not_empty')],
            },
        ),
        migrations.CreateModel(
            name='Workspace',
            fields=[
                ('id', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('label', models.CharField(max_length=200)),
                ('root', models.CharField(help_text='Absolute folder on disk, symlinks resolved.', max_length=4096)),
                ('token_hash', models.CharField(editable=False, max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='workspaces', to=settings.AUTH_USER_MODEL)),
                ('session', models.ForeignKey(blank=True, help_text='The chat session replies go to when `agent_name` names an agent.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='conversations.session')),
                ('agent_name', models.CharField(blank=True, default='', help_text="One of the server's own agents (GLOVE_AGENTS) whose session receives replies as turns; blank: the workspace's MCP client reads them with inbox_read.", max_length=100)),
                ('root_device', models.BigIntegerField(blank=True, editable=False, null=True)),
                ('root_inode', models.BigIntegerField(blank=True, editable=False, null=True)),
            ],
            options={
                'ordering': ['label', 'id'],
                'indexes': [models.Index(fields=['label', 'id'], name='workspace_label_idx')],
            },
        ),
        migrations.CreateModel(
            name='WorkspaceEntry',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, primary_key=True, serialize=False)),
                ('ts', models.BigIntegerField(help_text='Epoch milliseconds, stamped by the server.')),
                ('workspace_label', models.CharField(blank=True, max_length=200)),
                ('docs', models.JSONField(blank=True, default=list)),
                ('comments', models.TextField(blank=True, null=True)),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='workspace_entries', to=settings.AUTH_USER_MODEL)),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='entries', to='inbox.workspace')),
            ],
            options={
                'verbose_name_plural': 'workspace entries',
                'ordering': ['-ts', '-id'],
                'indexes': [models.Index(fields=['owner', 'ts', 'id'], name='ws_entry_owner_keyset'), models.Index(fields=['workspace', 'ts', 'id'], name='ws_entry_workspace_keyset'), models.Index(fields=['ts', 'id'], name='ws_entry_ts_idx')],
            },
        ),
        migrations.CreateModel(
            name='WorkspaceEntryRead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('read_at', models.DateTimeField(auto_now_add=True)),
                ('entry', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reads', to='inbox.workspaceentry')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('entry', 'user'), name='ws_entry_read_once')],
            },
        ),
        migrations.CreateModel(
            name='Notification',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('text', models.TextField()),
                ('urgency', models.CharField(choices=[('info', 'Info'), ('important', 'Important')], default='info', max_length=10)),
                ('source', models.CharField(default='manual', max_length=20)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to=settings.AUTH_USER_MODEL)),
                ('workspace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='inbox.workspace')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['user', 'created_at'], name='notification_user_time'), models.Index(fields=['created_at', 'id'], name='notification_created_idx')],
            },
        ),
        migrations.CreateModel(
            name='WorkspaceReply',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, primary_key=True, serialize=False)),
                ('text', models.TextField()),
                ('ts', models.BigIntegerField(help_text='Epoch milliseconds, stamped by the server.')),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('delivered_to', models.CharField(blank=True, choices=[('mcp', "the workspace's MCP client"), ('agent', "the workspace's server agent")], default='', max_length=10)),
                ('author', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('entry', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='replies', to='inbox.workspaceentry')),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='replies', to='inbox.workspace')),
            ],
            options={
                'verbose_name_plural': 'workspace replies',
                'ordering': ['ts', 'id'],
                'indexes': [models.Index(condition=models.Q(('delivered_at__isnull', True)), fields=['workspace', 'ts'], name='ws_reply_undelivered'), models.Index(fields=['entry', 'ts'], name='ws_reply_thread')],
            },
        ),
        migrations.CreateModel(
            name='UsedWebhookSignature',
            fields=[
                ('digest', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('used_at', models.DateTimeField(db_index=True)),
            ],
        ),
        *trigram_index_operations(
            table="inbox_inboxitem", column="request", name="inbox_request_trgm_idx"
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.F("status"),
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                name="inbox_admin_status_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.F("resolved_by"),
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                name="inbox_admin_resolved_by_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("blocking", True)),
                name="inbox_admin_blocking_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:")),
                name="inbox_admin_mesh_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.F("tag"),
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:")),
                name="inbox_admin_mesh_tag_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:from:")),
                name="inbox_admin_mesh_direct_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:broadcast:")),
                name="inbox_admin_mesh_broadcast_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:waiting:")),
                name="inbox_admin_waiting_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(fields=["created_at", "id"], name="inbox_created_idx"),
        ),
        add_index_if_absent(
            "inbox",
            "notification",
            models.Index(fields=["urgency", "created_at", "id"], name="notification_urgency_idx"),
        ),
        add_index_if_absent(
            "inbox",
            "notification",
            models.Index(fields=["source", "created_at", "id"], name="notification_source_idx"),
        ),
    ]
