"""Leave room in each page of the session table for the row's next version.

Every append rewrites its session's row (last_seq, counters, updated_at). PostgreSQL can do
that as a HOT update (no index entry, no dead version for the next append to step over) only
when the new version fits on the same page; with full pages it falls back to an ordinary
update. 70 keeps about 30% of each page free for that.
"""

from django.db import migrations


def set_fillfactor(apps, schema_editor, value: int | None) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("conversations", "Session")._meta.db_table)
    if value is None:
        schema_editor.execute(f"ALTER TABLE {table} RESET (fillfactor)")
    else:
        schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {value})")


class Migration(migrations.Migration):
    dependencies = [("conversations", "0007_session_parent")]

    operations = [
        migrations.RunPython(
            lambda apps, editor: set_fillfactor(apps, editor, 70),
            lambda apps, editor: set_fillfactor(apps, editor, None),
        ),
    ]
