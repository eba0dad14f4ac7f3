"""The budgets' generation: what a process's cache of the rules is checked against.

A one-row table whose value every statement that changes `budgets_budget` (insert, update,
delete, truncate; the admin, a bulk update or raw SQL alike) sets to its own transaction's
id, by a statement-level trigger, in that transaction: a model call's reservation reads it
in the same snapshot as the counters and writes nothing when it differs from the one its
cached rules were read at (gloveapp/budgets/applying.py). A transaction id is never reused,
so no change can bring back a value a cache holds. PostgreSQL only: SQLite reads the rules
at every call.
"""

from django.db import migrations

from gloveapp.lib.db.migrations import RunPython

TABLE = "budgets_rules_generation"

FORWARD = f"""
CREATE TABLE {TABLE} (
    id smallint PRIMARY KEY CHECK (id = 1),
    generation bigint NOT NULL
);
INSERT INTO {TABLE} (id, generation) VALUES (1, pg_current_xact_id()::text::bigint);
CREATE FUNCTION budgets_rules_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {TABLE} (id, generation) VALUES (1, pg_current_xact_id()::text::bigint)
    ON CONFLICT (id) DO UPDATE SET generation = EXCLUDED.generation;
    RETURN NULL;
END
$$;
CREATE TRIGGER budgets_rules_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON budgets_budget
    FOR EACH STATEMENT EXECUTE FUNCTION budgets_rules_changed();
"""

BACKWARD = f"""
DROP TRIGGER IF EXISTS budgets_rules_changed ON budgets_budget;
DROP FUNCTION IF EXISTS budgets_rules_changed();
DROP TABLE IF EXISTS {TABLE};
"""


def run(sql: str):
    def apply(apps, schema_editor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return apply


class Migration(migrations.Migration):
    dependencies = [("budgets", "0002_admin_filter_indexes")]

    operations = [RunPython(run(FORWARD), run(BACKWARD))]
