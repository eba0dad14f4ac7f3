# A long chat's page read every turn of the chat for the few stopped or failed ones whose
# note it shows (bench/scale.py: 25,000 turns, 49 ms); this partial index holds those alone.
# `CREATE INDEX IF NOT EXISTS`: on a large table, build it beforehand with CREATE INDEX
# CONCURRENTLY under the same name (docs/howto/deploy.md).

from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent


class Migration(migrations.Migration):
    dependencies = [
        ("turns", "0009_turn_restarting_slot_answered_by"),
    ]

    operations = [
        add_index_if_absent(
            "turns",
            "turn",
            models.Index(
                condition=models.Q(
                    ("end_seq__isnull", False), ("status__in", ["cancelled", "failed"])
                ),
                fields=["session", "end_seq"],
                name="turn_session_note_idx",
            ),
        ),
    ]
