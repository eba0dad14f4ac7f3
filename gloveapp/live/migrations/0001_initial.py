# LiveEvent moved here from the conversations app. State only: the table
# `conversations_liveevent` (created by conversations.0001) and its rows stay as they are.

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('conversations', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='LiveEvent',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('stream', models.CharField(max_length=200)),
                        ('type', models.CharField(max_length=100)),
                        ('payload', models.JSONField(default=dict)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'conversations_liveevent',
                        'ordering': ['id'],
                        'indexes': [models.Index(fields=['stream', 'id'], name='conversatio_stream_b5fa2a_idx')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
