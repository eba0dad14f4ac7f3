# The admin's filters, each value one range of an index of its own (a composite index on
# the filtered column then the list's order, or a partial index over the rare rows): without
# them a rare value (`?source=api`, `?decision=edit`) walked every row in the list's order to
# fill a page (bench/scale.py at 10M: 58 ms -> 1.2 s). `CREATE INDEX IF NOT EXISTS`: on a
# large table, build them beforehand with CREATE INDEX CONCURRENTLY under the same names
# (docs/howto/deploy.md).

from django.conf import settings
from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent


class Migration(migrations.Migration):
    dependencies = [
        ("inbox", "0010_inboxitem_trace_parent"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.F("status"),
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                name="inbox_admin_status_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.F("resolved_by"),
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                name="inbox_admin_resolved_by_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("blocking", True)),
                name="inbox_admin_blocking_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:")),
                name="inbox_admin_mesh_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.F("tag"),
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:")),
                name="inbox_admin_mesh_tag_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:from:")),
                name="inbox_admin_mesh_direct_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:broadcast:")),
                name="inbox_admin_mesh_broadcast_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(
                models.Case(
                    models.When(status="pending", then=models.Value(0)),
                    models.When(status="resolved", then=models.Value(1)),
                    default=models.Value(2),
                    output_field=models.IntegerField(),
                ),
                models.OrderBy(models.F("created_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("tag__startswith", "mesh:waiting:")),
                name="inbox_admin_waiting_idx",
            ),
        ),
        add_index_if_absent(
            "inbox",
            "inboxitem",
            models.Index(fields=["created_at", "id"], name="inbox_created_idx"),
        ),
        add_index_if_absent(
            "inbox",
            "notification",
            models.Index(fields=["urgency", "created_at", "id"], name="notification_urgency_idx"),
        ),
        add_index_if_absent(
            "inbox",
            "notification",
            models.Index(fields=["source", "created_at", "id"], name="notification_source_idx"),
        ),
    ]
