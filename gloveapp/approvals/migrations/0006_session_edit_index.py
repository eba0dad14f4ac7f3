# A long chat's page read every decided request of the chat for the few that staff edited
# (bench/scale.py: 20,200 rows, 0.47 s); this partial index holds the edited ones alone.
# `CREATE INDEX IF NOT EXISTS`: on a large table, build it beforehand with CREATE INDEX
# CONCURRENTLY under the same name (docs/howto/deploy.md).

from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0005_admin_list_indexes"),
    ]

    operations = [
        add_index_if_absent(
            "approvals",
            "approvalrequest",
            models.Index(
                condition=models.Q(("decision", "edit"), ("status", "decided")),
                fields=["session", "call_id"],
                name="approval_session_edit_idx",
            ),
        ),
    ]
