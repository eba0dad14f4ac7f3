"""Agent versions, each agent's draft and published pointers, publications, publish requests,
and replay runs with their results."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('conversations', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AgentVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('agent_name', models.CharField(max_length=100)),
                ('number', models.PositiveIntegerField()),
                ('system_prompt', models.TextField()),
                ('model', models.CharField(blank=True, default='', max_length=200)),
                ('model_settings', models.JSONField(blank=True, default=dict)),
                ('tools', models.JSONField(blank=True, null=True)),
                ('mcp_servers', models.JSONField(blank=True, null=True)),
                ('approval_policies', models.JSONField(blank=True, default=dict)),
                ('note', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('budgets', models.JSONField(blank=True, default=list)),
            ],
            options={
                'ordering': ['agent_name', '-number'],
                'constraints': [models.UniqueConstraint(fields=('agent_name', 'number'), name='version_number_unique')],
            },
        ),
        migrations.CreateModel(
            name='AgentPointer',
            fields=[
                ('agent_name', models.CharField(max_length=100, primary_key=True, serialize=False)),
                ('checks', models.TextField(blank=True, default='')),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('draft', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='versions.agentversion')),
                ('published', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='versions.agentversion')),
                ('publish_needs_approval', models.BooleanField(default=False)),
            ],
        ),
        migrations.CreateModel(
            name='ReplayRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('selection', models.CharField(blank=True, default='', max_length=500)),
                ('session_ids', models.JSONField(default=list)),
                ('checks', models.JSONField(blank=True, default=list)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed')], default='queued', max_length=10)),
                ('total', models.PositiveIntegerField(default=0)),
                ('done', models.PositiveIntegerField(default=0)),
                ('diverged', models.PositiveIntegerField(default=0)),
                ('failed_checks', models.PositiveIntegerField(default=0)),
                ('task_id', models.CharField(blank=True, default='', max_length=64)),
                ('trace_parent', models.CharField(blank=True, default='', max_length=64)),
                ('error', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('progressed_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('started_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='replays', to='versions.agentversion')),
                ('judge_cost', models.DecimalField(decimal_places=8, default=0, max_digits=16)),
                ('judge_tokens', models.BigIntegerField(default=0)),
                ('unseen_tools', models.CharField(choices=[('mark', 'mark'), ('run-sandbox', 'run in a sandbox')], default='mark', max_length=12)),
            ],
            options={
                'ordering': ['-id'],
            },
        ),
        migrations.CreateModel(
            name='ReplayResult',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('turns', models.JSONField(default=list)),
                ('diverged', models.BooleanField(default=False)),
                ('divergence', models.CharField(blank=True, default='', max_length=200)),
                ('unrecorded_calls', models.PositiveIntegerField(default=0)),
                ('findings', models.JSONField(blank=True, default=list)),
                ('checks_failed', models.PositiveIntegerField(default=0)),
                ('recorded_tokens', models.BigIntegerField(default=0)),
                ('replayed_tokens', models.BigIntegerField(default=0)),
                ('error', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.session')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='versions.replayrun')),
                ('judge_cost', models.DecimalField(blank=True, decimal_places=8, max_digits=16, null=True)),
                ('judge_tokens', models.BigIntegerField(default=0)),
            ],
            options={
                'ordering': ['run', 'id'],
                'indexes': [models.Index(condition=models.Q(('diverged', True)), fields=['run', 'id'], name='replay_diverged_idx')],
                'constraints': [models.UniqueConstraint(fields=('run', 'session'), name='one_result_per_session')],
            },
        ),
        migrations.CreateModel(
            name='VersionPublication',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('agent_name', models.CharField(max_length=100)),
                ('kind', models.CharField(choices=[('published', 'Published'), ('rolled_back', 'rolled back')], max_length=12)),
                ('at', models.DateTimeField(auto_now_add=True)),
                ('by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('previous', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='versions.agentversion')),
                ('replay_run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='versions.replayrun')),
                ('version', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='versions.agentversion')),
            ],
            options={
                'ordering': ['-id'],
                'indexes': [models.Index(fields=['agent_name', '-id'], name='publication_agent_idx')],
            },
        ),
        migrations.CreateModel(
            name='PublishRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('approval_id', models.UUIDField(unique=True)),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('published', 'Published'), ('rejected', 'Rejected'), ('stale', 'Stale')], default='pending', max_length=10)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('settled_at', models.DateTimeField(blank=True, null=True)),
                ('published_when_asked', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='versions.agentversion')),
                ('replay_run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='versions.replayrun')),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='versions.agentversion')),
            ],
            options={
                'ordering': ['-id'],
                'indexes': [models.Index(condition=models.Q(('state', 'pending')), fields=['id'], name='publish_request_pending_idx')],
            },
        ),
    ]
