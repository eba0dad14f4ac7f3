"""Per-session inbox item ids: `InboxItem.key`, filled with the id for every existing item,
unique within its session."""

from django.db import migrations, models


def fill_key(apps, schema_editor):
    InboxItem = apps.get_model("inbox", "InboxItem")
    InboxItem.objects.update(key=models.F("id"))


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0005_session_key"),
        ("inbox", "0002_workspace_inbox"),
    ]

    operations = [
        migrations.AddField(
            model_name="inboxitem",
            name="key",
            field=models.CharField(default="", max_length=128),
            preserve_default=False,
        ),
        migrations.RunPython(fill_key, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="inboxitem",
            constraint=models.UniqueConstraint(
                fields=("session", "key"), name="inbox_unique_session_key"
            ),
        ),
        migrations.AddConstraint(
            model_name="inboxitem",
            constraint=models.CheckConstraint(
                condition=models.Q(("key", ""), _negated=True), name="inbox_key_not_empty"
            ),
        ),
    ]
