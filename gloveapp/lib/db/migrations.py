"""Migration operations the apps share: indexes that may be built beforehand, concurrently,
and the logs partitioned by day on PostgreSQL."""

from __future__ import annotations

from typing import Any


def add_index_if_absent(app_label: str, model_name: str, index: Any) -> Any:
    """A migration operation adding `index` (the models' state: an `AddIndex`) that skips
    an index of that name already built: on PostgreSQL `CREATE INDEX IF NOT EXISTS`, so on
    a large table it may be built beforehand without blocking writes (`CREATE INDEX
    CONCURRENTLY` under the same name, docs/howto/deploy.md); elsewhere a plain one."""
    from django.db import migrations

    def create(apps: Any, schema_editor: Any) -> None:
        model = apps.get_model(app_label, model_name)
        if schema_editor.connection.vendor != "postgresql":
            schema_editor.add_index(model, index)
            return
        sql = str(index.create_sql(model, schema_editor))
        # No parameters: a partial index's condition may hold a literal `%` (a LIKE).
        schema_editor.execute(
            sql.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1), params=None
        )

    def drop(apps: Any, schema_editor: Any) -> None:
        schema_editor.remove_index(apps.get_model(app_label, model_name), index)

    return migrations.SeparateDatabaseAndState(
        state_operations=[migrations.AddIndex(model_name=model_name, index=index)],
        database_operations=[migrations.RunPython(create, drop, elidable=False)],
    )


def trigram_index_operations(*, table: str, column: str, name: str) -> list[Any]:
    """Migration operations for a trigram index serving `column__icontains` on PostgreSQL
    (`UPPER(column) LIKE UPPER('%term%')`, as Django writes it): the `pg_trgm` extension
    (trusted: a database owner may create it) and a GIN index on `UPPER(column)`. Nothing on
    another database. Outside the models' state (a GIN index is PostgreSQL's only); IF NOT
    EXISTS, so a large table's index may be built beforehand with CREATE INDEX CONCURRENTLY
    under the same name (docs/howto/deploy.md)."""
    from django.db import migrations

    def extension(apps: Any, schema_editor: Any) -> None:
        # Never dropped on the way back: another app's trigram index may still use it
        # (migrations are unapplied one app at a time).
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")

    def create(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(
                f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" '
                f'USING gin ((UPPER("{column}"::text)) gin_trgm_ops)'
            )

    def drop(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')

    return [
        migrations.RunPython(extension, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(create, drop, elidable=False),
    ]


def partition_by_day(
    *,
    table: str,
    column: str,
    key: str = "id",
    unique: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> Any:
    """A migration operation making `table` partitioned by day of `column` on PostgreSQL
    (`gloveapp.lib.db.partitions.partition_table`, with its `key` and per-day `unique`
    keys); nothing on another database. Reversible: the reverse puts the rows back in a
    plain table.

    Django defers a new table's indexes and foreign keys to the end of its migration; they
    are made here first, so a table created earlier in the same migration is partitioned
    whole, each index and constraint recreated on the partitioned table."""
    from django.db import migrations

    from gloveapp.lib.db.partitions import partition_table, unpartition_table

    def forwards(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        while schema_editor.deferred_sql:
            schema_editor.execute(schema_editor.deferred_sql.pop(0))
        partition_table(schema_editor, table=table, column=column, key=key, unique=unique)

    def backwards(apps: Any, schema_editor: Any) -> None:
        unpartition_table(schema_editor, table=table, key=key, unique=unique)

    return migrations.RunPython(forwards, backwards, elidable=False)
