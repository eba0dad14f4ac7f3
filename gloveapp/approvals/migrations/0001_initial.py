"""Approval requests, their decisions and their notifications.

Beyond the models' state, indexes built with `CREATE INDEX IF NOT EXISTS` on PostgreSQL
(`add_index_if_absent`; each may be built beforehand with CREATE INDEX CONCURRENTLY under
the same name, docs/howto/deploy.md):
- `approval_session_edit_idx`: a long chat's page reads the few requests staff edited (a
  partial index over those alone), not every decided request of the chat;
- `approval_tool_created_idx`: the admin's search (an exact id, tool name or session id)
  combines its indexes; without one on the tool name PostgreSQL read the table in order
  until its bounded count was found;
- the admin's filters (kind, channel, decision), each value one range of an index of its
  own in the list's order.
"""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('conversations', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApprovalRequest',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('turn_id', models.BigIntegerField(blank=True, null=True)),
                ('slot_id', models.CharField(blank=True, default='', max_length=64)),
                ('tool_name', models.CharField(max_length=200)),
                ('call_id', models.CharField(blank=True, default='', max_length=200)),
                ('args', models.JSONField()),
                ('fingerprint', models.CharField(max_length=64)),
                ('input_schema', models.JSONField(blank=True, null=True)),
                ('decisions', models.JSONField()),
                ('staff_only', models.JSONField(blank=True, default=list)),
                ('status', models.CharField(choices=[('open', 'Open'), ('decided', 'Decided'), ('withdrawn', 'Withdrawn')], default='open', max_length=10)),
                ('decision', models.CharField(blank=True, default='', max_length=10)),
                ('created_at', models.DateTimeField()),
                ('remind_at', models.DateTimeField(blank=True, null=True)),
                ('escalate_at', models.DateTimeField(blank=True, null=True)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('on_expire', models.CharField(default='reject', max_length=10)),
                ('on_expire_text', models.TextField(blank=True, default='')),
                ('reminded_at', models.DateTimeField(blank=True, null=True)),
                ('escalated_at', models.DateTimeField(blank=True, null=True)),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('assignee_group', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='assigned_approvals', to='auth.group')),
                ('assignee_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='assigned_approvals', to=settings.AUTH_USER_MODEL)),
                ('escalate_to_group', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='auth.group')),
                ('escalate_to_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='approval_requests', to='conversations.session')),
                ('customer_summary', models.CharField(blank=True, default='', max_length=500)),
                ('label', models.CharField(blank=True, default='', max_length=200)),
                ('summary', models.CharField(blank=True, default='', max_length=500)),
                ('total', models.CharField(blank=True, default='', max_length=500)),
                ('requested_by', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'indexes': [models.Index(fields=['session', 'status'], name='approvals_a_session_739c5d_idx'), models.Index(fields=['turn_id', 'status'], name='approvals_a_turn_id_3839ee_idx'), models.Index(condition=models.Q(('status', 'open')), fields=['expires_at'], name='approval_open_expiry_idx'), models.Index(condition=models.Q(('escalated_at__isnull', True), ('status', 'open')), fields=['escalate_at'], name='approval_open_escalate_idx'), models.Index(condition=models.Q(('reminded_at__isnull', True), ('status', 'open')), fields=['remind_at'], name='approval_open_remind_idx'), models.Index(fields=['status', 'created_at', 'id'], name='approval_status_created_idx'), models.Index(fields=['assignee_user', 'status', 'created_at', 'id'], name='approval_user_queue_idx'), models.Index(fields=['assignee_group', 'status', 'created_at', 'id'], name='approval_group_queue_idx'), models.Index(fields=['created_at', 'id'], name='approval_created_idx')],
            },
        ),
        migrations.CreateModel(
            name='ApprovalDecision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('approve', 'approve'), ('edit', 'edit'), ('reject', 'reject'), ('respond', 'respond')], max_length=10)),
                ('username', models.CharField(blank=True, default='', max_length=150)),
                ('channel', models.CharField(choices=[('page', 'Page'), ('admin', 'Admin'), ('rest', 'Rest'), ('webhook', 'Webhook'), ('email', 'Email'), ('expiry', 'Expiry'), ('python', 'Python')], max_length=10)),
                ('fingerprint_seen', models.CharField(max_length=64)),
                ('args', models.JSONField(blank=True, null=True)),
                ('reason', models.TextField(blank=True, default='')),
                ('text', models.TextField(blank=True, default='')),
                ('decided_at', models.DateTimeField()),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approval_decisions', to=settings.AUTH_USER_MODEL)),
                ('request', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='decision_row', to='approvals.approvalrequest')),
            ],
            options={
                'ordering': ['-decided_at', '-id'],
                'indexes': [models.Index(fields=['decided_at', 'id'], name='approval_decision_decided_idx')],
            },
        ),
        migrations.CreateModel(
            name='ApprovalNotification',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.CharField(choices=[('assigned', 'Assigned'), ('reminder', 'Reminder'), ('escalation', 'Escalation'), ('expiry', 'Expiry'), ('handoff', 'Handoff'), ('handoff_late', 'Handoff Late')], max_length=12)),
                ('channel', models.CharField(choices=[('email', 'Email'), ('webhook', 'Webhook')], max_length=8)),
                ('recipient', models.CharField(max_length=254)),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed')], default='pending', max_length=8)),
                ('attempts', models.PositiveSmallIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField()),
                ('claimed_until', models.DateTimeField(blank=True, null=True)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField()),
                ('request', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to='approvals.approvalrequest')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('handoff', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.handoffrecord')),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(condition=models.Q(('status__in', ['pending', 'sending'])), fields=['next_attempt_at'], name='approval_notify_due_idx')],
                'constraints': [models.UniqueConstraint(fields=('request', 'event', 'channel', 'recipient'), name='one_notification_per_recipient_and_event'), models.UniqueConstraint(condition=models.Q(('handoff__isnull', False)), fields=('handoff', 'channel', 'recipient'), name='one_handoff_notification_per_recipient'), models.CheckConstraint(condition=models.Q(('request__isnull', False), ('handoff__isnull', False), _connector='OR'), name='notification_of_something')],
            },
        ),
        add_index_if_absent(
            "approvals",
            "approvalrequest",
            models.Index(
                condition=models.Q(("decision", "edit"), ("status", "decided")),
                fields=["session", "call_id"],
                name="approval_session_edit_idx",
            ),
        ),
        add_index_if_absent(
            "approvals",
            "approvalrequest",
            models.Index(
                fields=["tool_name", "created_at", "id"], name="approval_tool_created_idx"
            ),
        ),
        add_index_if_absent(
            "approvals",
            "approvaldecision",
            models.Index(fields=["kind", "decided_at", "id"], name="approval_decision_kind_idx"),
        ),
        add_index_if_absent(
            "approvals",
            "approvaldecision",
            models.Index(
                fields=["channel", "decided_at", "id"], name="approval_decision_channel_idx"
            ),
        ),
        add_index_if_absent(
            "approvals",
            "approvalrequest",
            models.Index(
                fields=["decision", "created_at", "id"], name="approval_decision_created_idx"
            ),
        ),
    ]
