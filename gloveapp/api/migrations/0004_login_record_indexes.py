# django-axes' records of logins, newest first, as their admin lists them (and as their
# retention forgets the oldest), and one username's or address's records in that order (its
# search): axes declares no index on the time, so its lists sorted the whole table a page.
# Outside the models' state (the models are axes'); IF NOT EXISTS, so they may be built
# beforehand with CREATE INDEX CONCURRENTLY under the same names (docs/howto/deploy.md).

from django.apps import apps as django_apps
from django.db import migrations

TABLES = {
    "log": "axes_accesslog",
    "failure": "axes_accessfailurelog",
    "attempt": "axes_accessattempt",
}
# The list, and the list of one username's or one address's records (the admin's search),
# each in its order without a sort.
COLUMNS = {
    "time": '"attempt_time" DESC',
    "user_time": '"username", "attempt_time" DESC',
    "address_time": '"ip_address", "attempt_time" DESC',
}
INDEXES = {
    f"glove_axes_{short}_{what}_idx": (table, columns)
    for short, table in TABLES.items()
    for what, columns in COLUMNS.items()
}


def create(apps, schema_editor):
    # A project that installs the apps without django-axes has none of these tables.
    tables = set(schema_editor.connection.introspection.table_names())
    for name, (table, columns) in INDEXES.items():
        if table in tables:
            schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({columns})')


def drop(apps, schema_editor):
    for name in INDEXES:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    # After axes' tables, where axes is installed.
    dependencies = [("api", "0003_user_filter_indexes")] + (
        [("axes", "0010_accessattemptexpiration")] if django_apps.is_installed("axes") else []
    )

    operations = [migrations.RunPython(create, drop, elidable=False)]
