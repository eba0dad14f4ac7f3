from django.db import migrations, models


def fill_last_seq(apps, schema_editor):
    Session = apps.get_model("conversations", "Session")
    Message = apps.get_model("conversations", "Message")
    last = models.Subquery(
        Message.objects.filter(session_id=models.OuterRef("pk"))
        .order_by("-seq")
        .values("seq")[:1]
    )
    Session.objects.update(last_seq=models.functions.Coalesce(last, 0))


class Migration(migrations.Migration):
    dependencies = [("conversations", "0003_message_extra_and_cache_tokens")]

    operations = [
        migrations.AddField(
            model_name="session",
            name="last_seq",
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.RunPython(fill_last_seq, migrations.RunPython.noop),
    ]
