"""A session's items by (status, created_at, key): the consumed ones are read a page at a
time, newest first, as one index range, instead of sorting all of a long session's. The
new index is built before the old (session, status) one goes, which it replaces."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inbox", "0006_inbox_decisions"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="inboxitem",
            index=models.Index(
                fields=["session", "status", "created_at", "key"],
                name="inbox_session_status_idx",
            ),
        ),
        migrations.RemoveIndex(
            model_name="inboxitem",
            name="inbox_inbox_session_1bcf75_idx",
        ),
    ]
