"""Migration operations the apps share: indexes that may be built beforehand, concurrently,
and the logs partitioned by day on PostgreSQL."""

from __future__ import annotations

from typing import Any

from django.db import migrations, router


class _AppsWhenAsked:
    """The historical models a `RunPython` function is given, rendered only if it reads them:
    Django renders every model of the project's state before each one (some 0.1 s of CPU
    each, most of a new database's `migrate`), and these functions need only the schema
    editor."""

    def __init__(self, state: Any) -> None:
        self._state = state
        self._apps: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._apps is None:
            # What Django's RunPython does before it runs the code, once.
            self._state.clear_delayed_apps_cache()
            self._apps = self._state.apps
        return getattr(self._apps, name)


class RunPython(migrations.RunPython):
    """Django's `RunPython` (same arguments), its models rendered when the code reads them."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints):
            self.code(_AppsWhenAsked(from_state), schema_editor)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if self.reverse_code is None:
            raise NotImplementedError("You cannot reverse this operation")
        if router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints):
            self.reverse_code(_AppsWhenAsked(from_state), schema_editor)


class AddIndexIfAbsent(migrations.AddIndex):
    """Django's `AddIndex` (the models' state the same) that skips an index of that name
    already built: on PostgreSQL `CREATE INDEX IF NOT EXISTS`, so on a large table it may be
    built beforehand without blocking writes (`CREATE INDEX CONCURRENTLY` under the same
    name, docs/howto/deploy.md); elsewhere a plain one."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor != "postgresql":
            schema_editor.add_index(model, self.index)
            return
        sql = str(self.index.create_sql(model, schema_editor))
        # No parameters: a partial index's condition may hold a literal `%` (a LIKE).
        schema_editor.execute(
            sql.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1), params=None
        )


def add_index_if_absent(app_label: str, model_name: str, index: Any) -> AddIndexIfAbsent:
    """`AddIndexIfAbsent` of `index` on `model_name` (`app_label` is the migration's own)."""
    return AddIndexIfAbsent(model_name=model_name, index=index)


def trigram_index_operations(*, table: str, column: str, name: str) -> list[Any]:
    """Migration operations for a trigram index serving `column__icontains` on PostgreSQL
    (`UPPER(column) LIKE UPPER('%term%')`, as Django writes it): the `pg_trgm` extension
    (trusted: a database owner may create it) and a GIN index on `UPPER(column)`. Nothing on
    another database. Outside the models' state (a GIN index is PostgreSQL's only); IF NOT
    EXISTS, so a large table's index may be built beforehand with CREATE INDEX CONCURRENTLY
    under the same name (docs/howto/deploy.md)."""

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
        RunPython(extension, migrations.RunPython.noop, elidable=False),
        RunPython(create, drop, elidable=False),
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
    from gloveapp.lib.db.partitions import partition_table, unpartition_table

    def forwards(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        while schema_editor.deferred_sql:
            schema_editor.execute(schema_editor.deferred_sql.pop(0))
        partition_table(schema_editor, table=table, column=column, key=key, unique=unique)

    def backwards(apps: Any, schema_editor: Any) -> None:
        unpartition_table(schema_editor, table=table, key=key, unique=unique)

    return RunPython(forwards, backwards, elidable=False)
