# The turns table's indexes, from 9 to 6 (4 of them were on session_id): (session, id) for
# the newest turn, a partial (session, id) of the turns that run or wait, and none on
# lease_until, so a heartbeat is a HOT update. On PostgreSQL the table leaves a fifth of
# each page free (fillfactor 80) for those updates' new row versions.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

OLD_FOREIGN_KEY_INDEXES = [
    "turns_turn_session_id_851897c1",
    "turns_turn_session_id_851897c1_like",
    "turns_turn_user_id_7fe7c6cf",
    "turns_turn_stopped_by_id_5f55b4c3",
]

# Reversed: the foreign keys' indexes again (not PostgreSQL's `_like` one, never used here).
RESTORED_INDEXES = [
    ("turns_turn_session_id_851897c1", "session_id"),
    ("turns_turn_user_id_7fe7c6cf", "user_id"),
    ("turns_turn_stopped_by_id_5f55b4c3", "stopped_by_id"),
]


def fillfactor(value):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE turns_turn SET (fillfactor = {value})")

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0009_idempotent_request"),
        ("turns", "0004_turn_stopped_by"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="turn",
            name="turns_turn_session_55177c_idx",
        ),
        migrations.RemoveIndex(
            model_name="turn",
            name="turns_turn_status_62e565_idx",
        ),
        # The foreign keys' own indexes go by name: Django's AlterField(db_index=False)
        # would also drop the partial unique index on session_id (one running turn).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="turn",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="turns",
                        to="conversations.session",
                    ),
                ),
                migrations.AlterField(
                    model_name="turn",
                    name="stopped_by",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="turn",
                    name="user",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    [f"DROP INDEX IF EXISTS {name}" for name in OLD_FOREIGN_KEY_INDEXES],
                    [
                        f"CREATE INDEX {name} ON turns_turn ({column})"
                        for name, column in RESTORED_INDEXES
                    ],
                    elidable=False,
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="turn",
            index=models.Index(fields=["session", "id"], name="turn_session_newest_idx"),
        ),
        migrations.AddIndex(
            model_name="turn",
            index=models.Index(
                condition=models.Q(("status__in", ["queued", "running", "waiting"])),
                fields=["session", "id"],
                name="turn_session_unfinished_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="turn",
            index=models.Index(
                condition=models.Q(("stopped_by__isnull", False)),
                fields=["stopped_by"],
                name="turn_stopped_by_idx",
            ),
        ),
        migrations.RunPython(fillfactor(80), fillfactor(100), elidable=False),
    ]
