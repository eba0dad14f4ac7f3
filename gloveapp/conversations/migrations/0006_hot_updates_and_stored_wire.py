"""Appends as HOT updates, and each message's wire text stored with it.

- The (owner, -updated_at) index and the owner / message-session indexes go: every append
  changed updated_at, so PostgreSQL could never update a session in place (a HOT update) and
  wrote five index entries per append; the two foreign keys are the leading columns of the
  (owner, key) and (session, seq) unique indexes, which serve their lookups.
- `Message.wire`: the message as the REST GET sends it, filled here for existing rows (a
  row it misses is read back from its columns, as before).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

BATCH = 2000


def fill_wire(apps, schema_editor):
    from gloveapp.conversations.serialization import (
        MESSAGE_VALUES,
        message_from_values,
        wire_json,
    )

    Message = apps.get_model("conversations", "Message")
    last = 0
    while True:
        rows = list(
            Message.objects.filter(pk__gt=last, wire__isnull=True)
            .order_by("pk")
            .values_list("pk", *MESSAGE_VALUES)[:BATCH]
        )
        if not rows:
            return
        Message.objects.bulk_update(
            [
                Message(pk=row[0], wire=wire_json(message_from_values(row[1:]).to_dict()))
                for row in rows
            ],
            ["wire"],
        )
        last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0005_session_key"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="session",
            name="conversatio_owner_i_342baf_idx",
        ),
        migrations.AddField(
            model_name="message",
            name="wire",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(fill_wire, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="message",
            name="session",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="messages",
                to="conversations.session",
            ),
        ),
        migrations.AlterField(
            model_name="session",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="glove_sessions",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
