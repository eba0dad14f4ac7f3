# Mesh traffic filtered by status, one range of an index over the mesh items alone: a status
# no mesh item held walked every item of that status (bench/scale.py at 10M: 37 -> 73 ms for
# an empty page). `CREATE INDEX IF NOT EXISTS`: on a large inbox, build it beforehand with
# CREATE INDEX CONCURRENTLY under the same name (docs/howto/deploy.md).

from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent
from inbox.models import MESH_TAG, admin_order_index


class Migration(migrations.Migration):
    dependencies = [("inbox", "0001_initial")]

    operations = [
        add_index_if_absent(
            "inbox",
            "inboxitem",
            admin_order_index(
                "inbox_admin_mesh_status_idx",
                "status",
                condition=models.Q(tag__startswith=MESH_TAG),
            ),
        ),
    ]
