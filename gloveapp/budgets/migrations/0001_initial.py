"""Budgets, their counters per window and their ledger of reservations."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
    ]

    operations = [
        migrations.CreateModel(
            name='Budget',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.SlugField(help_text="The budget's id: its counters, its ledger rows and its metrics' label.", max_length=100, unique=True)),
                ('name', models.CharField(blank=True, default='', max_length=200)),
                ('scope', models.CharField(choices=[('user', 'a user (or each user)'), ('group', 'a group (or each group)'), ('agent', 'an agent (or each agent)'), ('session', 'a session (or each session)'), ('everyone', 'everyone together')], max_length=10)),
                ('target', models.CharField(blank=True, default='', help_text='A username, group name, agent name or session id; empty: each one apart (every user has a budget of their own). Empty for everyone.', max_length=200)),
                ('window', models.CharField(choices=[('minute', 'a minute'), ('turn', 'a turn'), ('day', 'a day (UTC)'), ('month', 'a month (UTC)')], max_length=10)),
                ('cap_usd', models.DecimalField(blank=True, decimal_places=12, help_text='US dollars, as GLOVE_MODEL_PRICES counts.', max_digits=24, null=True)),
                ('cap_tokens', models.BigIntegerField(blank=True, null=True)),
                ('cap_turns', models.IntegerField(blank=True, null=True)),
                ('action', models.CharField(choices=[('warn', 'warn staff, let it go on'), ('require_person', 'wait for a person to raise the limit'), ('refuse', 'refuse')], default='refuse', max_length=16)),
                ('active', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['key'],
                'indexes': [models.Index(condition=models.Q(('active', True)), fields=['scope', 'target'], name='budget_applies_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(('cap_usd__isnull', False), ('cap_tokens__isnull', False), ('cap_turns__isnull', False), _connector='OR'), name='budget_has_a_cap'), models.CheckConstraint(condition=models.Q(models.Q(('scope', 'everyone'), _negated=True), ('target', ''), _connector='OR'), name='budget_everyone_no_target'), models.CheckConstraint(condition=models.Q(models.Q(('cap_usd__isnull', True), ('cap_usd__gte', 0), _connector='OR'), models.Q(('cap_tokens__isnull', True), ('cap_tokens__gte', 0), _connector='OR'), models.Q(('cap_turns__isnull', True), ('cap_turns__gte', 0), _connector='OR')), name='budget_caps_not_negative')],
            },
        ),
        migrations.CreateModel(
            name='BudgetCounter',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('budget_key', models.CharField(max_length=100)),
                ('window_key', models.CharField(max_length=255)),
                ('ends_at', models.DateTimeField()),
                ('spent_usd', models.DecimalField(decimal_places=12, default=0, max_digits=24)),
                ('reserved_usd', models.DecimalField(decimal_places=12, default=0, max_digits=24)),
                ('spent_tokens', models.BigIntegerField(default=0)),
                ('reserved_tokens', models.BigIntegerField(default=0)),
                ('turns', models.IntegerField(default=0)),
                ('warned_at', models.DateTimeField(blank=True, null=True)),
                ('refused_usd', models.DecimalField(blank=True, decimal_places=12, max_digits=24, null=True)),
                ('refused_tokens', models.BigIntegerField(blank=True, null=True)),
                ('started', models.JSONField(blank=True, default=list)),
            ],
            options={
                'indexes': [models.Index(fields=['ends_at'], name='budget_counter_ends_idx')],
                'constraints': [models.UniqueConstraint(fields=('budget_key', 'window_key'), name='budget_counter_unique_window')],
            },
        ),
        migrations.CreateModel(
            name='BudgetReservation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('counter_id', models.BigIntegerField()),
                ('budget_key', models.CharField(max_length=100)),
                ('window_key', models.CharField(max_length=255)),
                ('turn_id', models.BigIntegerField(blank=True, null=True)),
                ('attempt', models.PositiveSmallIntegerField(default=0)),
                ('model', models.CharField(blank=True, default='', max_length=200)),
                ('state', models.CharField(choices=[('reserved', 'Reserved'), ('settled', 'Settled'), ('released', 'Released')], default='reserved', max_length=10)),
                ('reserved_usd', models.DecimalField(decimal_places=12, default=0, max_digits=24)),
                ('settled_usd', models.DecimalField(decimal_places=12, default=0, max_digits=24)),
                ('reserved_tokens', models.BigIntegerField(default=0)),
                ('settled_tokens', models.BigIntegerField(default=0)),
                ('created_at', models.DateTimeField()),
                ('settled_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'indexes': [models.Index(fields=['turn_id'], name='budget_ledger_turn_idx'), models.Index(condition=models.Q(('state', 'reserved')), fields=['created_at'], name='budget_open_idx'), models.Index(fields=['created_at', 'id'], name='budget_ledger_created_idx')],
            },
        ),
    ]
