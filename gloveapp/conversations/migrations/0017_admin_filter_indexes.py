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
        ("conversations", "0016_message_agent_version"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        add_index_if_absent(
            "conversations",
            "session",
            models.Index(
                condition=models.Q(("parent__isnull", False)),
                fields=["created_at", "id"],
                name="session_child_created_idx",
            ),
        ),
    ]
