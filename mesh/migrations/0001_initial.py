"""The mesh's agents, senders, deliveries and refusals.

On PostgreSQL the sender and delivery records are partitioned by day
(gloveapp/lib/db/partitions.py): retention drops whole days instead of deleting rows. "One
sender per message id" and "one delivery per message and recipient" stay: a unique index per
day, and across days the advisory lock every writer takes on the key (`mesh.services`).
SQLite keeps the plain tables and their keys.
"""

import django.db.models.deletion
from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent, partition_by_day


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('inbox', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='MeshAgent',
            fields=[
                ('agent_id', models.CharField(max_length=128, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=200)),
                ('description', models.TextField(blank=True, default='')),
                ('capabilities', models.JSONField(blank=True, null=True)),
                ('metadata', models.JSONField(blank=True, null=True)),
                ('inbox_session', models.CharField(blank=True, default='', max_length=128)),
                ('registered_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['agent_id'],
            },
        ),
        migrations.CreateModel(
            name='MeshSentMessage',
            fields=[
                ('message_id', models.CharField(max_length=128, primary_key=True, serialize=False)),
                ('sender', models.CharField(max_length=128)),
                ('kind', models.CharField(max_length=10)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name='MeshTraffic',
            fields=[
            ],
            options={
                'verbose_name': 'mesh message',
                'verbose_name_plural': 'mesh traffic',
                'proxy': True,
                'indexes': [],
                'constraints': [],
            },
            bases=('inbox.inboxitem',),
        ),
        migrations.CreateModel(
            name='MeshDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('message_id', models.CharField(max_length=128)),
                ('recipient', models.CharField(max_length=128)),
                ('sender', models.CharField(max_length=128)),
                ('kind', models.CharField(choices=[('direct', 'Direct'), ('broadcast', 'Broadcast'), ('ack', 'Ack')], max_length=10)),
                ('body', models.JSONField()),
                ('delivered_at', models.DateTimeField(auto_now_add=True)),
                ('inbox_item', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='inbox.inboxitem')),
            ],
            options={
                'verbose_name_plural': 'mesh deliveries',
                'ordering': ['-id'],
                'indexes': [models.Index(fields=['recipient', 'id'], name='mesh_delivery_cursor_idx')],
                'constraints': [models.UniqueConstraint(fields=('message_id', 'recipient'), name='mesh_delivery_once_per_recipient')],
            },
        ),
        migrations.CreateModel(
            name='MeshRefusal',
            fields=[
                ('reason', models.CharField(max_length=40, primary_key=True, serialize=False)),
                ('count', models.BigIntegerField(default=0)),
                ('last_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['reason'],
            },
        ),
        partition_by_day(
            table="mesh_meshsentmessage",
            column="created_at",
            key="message_id",
            unique=(("mesh_one_sender_per_message", ("message_id",)),),
        ),
        partition_by_day(
            table="mesh_meshdelivery",
            column="delivered_at",
            unique=(("mesh_delivery_once_per_recipient", ("message_id", "recipient")),),
        ),
        # The admin's filters by sender and by kind, in the list's order (an index range per
        # value). `CREATE INDEX IF NOT EXISTS` on PostgreSQL: it may be built beforehand with
        # CREATE INDEX CONCURRENTLY under the same name (docs/howto/deploy.md).
        add_index_if_absent(
            "mesh",
            "meshdelivery",
            models.Index(fields=["sender", "id"], name="mesh_delivery_sender_idx"),
        ),
        add_index_if_absent(
            "mesh",
            "meshdelivery",
            models.Index(fields=["kind", "id"], name="mesh_delivery_kind_idx"),
        ),
    ]
