"""Per-owner session ids: `Session.key`, filled with the id for every existing session (so
every URL, token and test keeps working), unique per owner; and the owners' retired keys."""

from django.conf import settings
from django.db import migrations, models


def fill_key(apps, schema_editor):
    Session = apps.get_model("conversations", "Session")
    Session.objects.update(key=models.F("id"))


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0004_session_last_seq"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="key",
            field=models.CharField(default="", max_length=128),
            preserve_default=False,
        ),
        migrations.RunPython(fill_key, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="session",
            constraint=models.UniqueConstraint(
                fields=("owner", "key"), name="session_unique_owner_key"
            ),
        ),
        migrations.AddConstraint(
            model_name="session",
            constraint=models.CheckConstraint(
                condition=models.Q(("key", ""), _negated=True), name="session_key_not_empty"
            ),
        ),
        migrations.CreateModel(
            name="RetiredSessionKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(max_length=128)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("owner", "key"), name="retired_session_key_unique"
                    )
                ],
            },
        ),
    ]
