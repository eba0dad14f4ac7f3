"""`Session.person_message_count`, and the index the owner's paged list reads.

The count is filled in batches of sessions, each its own transaction (the migration is not
atomic), so a database of a million sessions and ten million messages is filled without one
long transaction: each batch counts its sessions' person messages through the
(session, seq) index and writes only the counts that are not 0.
"""

from django.db import migrations, models, transaction
from django.db.models import Count, Q

BATCH = 1000

# `models.PERSON_MESSAGE` as it stood when this migration was written.
PERSON_MESSAGE = (
    Q(sender="user", is_compaction=False, is_skill_injection=False)
    & Q(framework_context__isnull=True, tool_results__isnull=True)
    & ~Q(text="")
)


def fill_counts(apps, schema_editor):
    Session = apps.get_model("conversations", "Session")
    Message = apps.get_model("conversations", "Message")
    db = schema_editor.connection.alias
    last = None
    while True:
        batch = Session.objects.using(db).order_by("pk")
        if last is not None:
            batch = batch.filter(pk__gt=last)
        ids = list(batch.values_list("pk", flat=True)[:BATCH])
        if not ids:
            return
        counts = (
            Message.objects.using(db)
            .filter(PERSON_MESSAGE, session_id__in=ids)
            .values("session_id")
            .annotate(n=Count("id"))
            .values_list("session_id", "n")
        )
        with transaction.atomic(using=db):
            for session_id, count in counts:
                Session.objects.using(db).filter(pk=session_id).update(person_message_count=count)
        last = ids[-1]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("conversations", "0009_idempotent_request"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="person_message_count",
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(
                fields=["owner", "-created_at", "-key"], name="session_owner_created_idx"
            ),
        ),
        migrations.RunPython(fill_counts, migrations.RunPython.noop, elidable=True),
    ]
