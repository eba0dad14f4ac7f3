# The admin's search (an exact id, tool name or session id) could not combine its indexes
# with no index on the tool name: PostgreSQL read the table in order until its bounded count
# was found (bench/scale.py at 10M: 14 ms for the long chat, 245 ms for a session with one
# request). `CREATE INDEX IF NOT EXISTS`: on a large table, build it beforehand with CREATE
# INDEX CONCURRENTLY under the same name (docs/howto/deploy.md).

from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0006_session_edit_index"),
    ]

    operations = [
        add_index_if_absent(
            "approvals",
            "approvalrequest",
            models.Index(
                fields=["tool_name", "created_at", "id"], name="approval_tool_created_idx"
            ),
        ),
    ]
