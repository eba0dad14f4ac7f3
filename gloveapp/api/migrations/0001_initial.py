"""The webhook a token's turns report to, and indexes on tables that are not the project's
(outside the models' state, PostgreSQL's and django-axes' where they apply):

- trigram indexes (`pg_trgm`) for the users admin's search: its `%term%` on the username,
  names and e-mail read every user without them;
- partial indexes for the users admin's filters on a rare value (staff, superusers,
  inactive users: a handful of a million), in its order (the username): without them
  `?is_staff__exact=1` walked every user in username order to fill a page;
- django-axes' records of logins, newest first, as their admin lists them (and as their
  retention forgets the oldest), and one username's or address's records in that order
  (its search): axes declares no index on the time, so its lists sorted the whole table a
  page.

`CREATE INDEX IF NOT EXISTS`: each may be built beforehand with CREATE INDEX CONCURRENTLY
under the same name (docs/howto/deploy.md).
"""

import django.db.models.deletion
from django.apps import apps as django_apps
from django.db import migrations, models

from gloveapp.lib.db.migrations import RunPython, trigram_index_operations

SEARCHED = ("username", "first_name", "last_name", "email")

USER_PARTIAL = {
    "glove_user_staff_idx": "is_staff",
    "glove_user_superuser_idx": "is_superuser",
    "glove_user_inactive_idx": "NOT is_active",
}

AXES_TABLES = {
    "log": "axes_accesslog",
    "failure": "axes_accessfailurelog",
    "attempt": "axes_accessattempt",
}
# The list, and the list of one username's or one address's records (the admin's search),
# each in its order without a sort.
AXES_COLUMNS = {
    "time": '"attempt_time" DESC',
    "user_time": '"username", "attempt_time" DESC',
    "address_time": '"ip_address", "attempt_time" DESC',
}
AXES_INDEXES = {
    f"glove_axes_{short}_{what}_idx": (table, columns)
    for short, table in AXES_TABLES.items()
    for what, columns in AXES_COLUMNS.items()
}


def create_user_filter_indexes(apps, schema_editor):
    for name, condition in USER_PARTIAL.items():
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON "auth_user" ("username") WHERE {condition}'
        )


def drop_user_filter_indexes(apps, schema_editor):
    for name in USER_PARTIAL:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


def create_login_record_indexes(apps, schema_editor):
    # A project that installs the apps without django-axes has none of these tables.
    tables = set(schema_editor.connection.introspection.table_names())
    for name, (table, columns) in AXES_INDEXES.items():
        if table in tables:
            schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({columns})')


def drop_login_record_indexes(apps, schema_editor):
    for name in AXES_INDEXES:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):

    initial = True

    # After axes' tables, where axes is installed.
    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('authtoken', '0004_alter_tokenproxy_options'),
    ] + (
        [("axes", "0010_accessattemptexpiration")] if django_apps.is_installed("axes") else []
    )

    operations = [
        migrations.CreateModel(
            name='TokenWebhook',
            fields=[
                ('token', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='webhook', serialize=False, to='authtoken.token')),
                ('url', models.URLField(max_length=2000)),
            ],
        ),
        *(
            operation
            for column in SEARCHED
            for operation in trigram_index_operations(
                table="auth_user", column=column, name=f"glove_user_{column}_trgm_idx"
            )
        ),
        RunPython(
            create_user_filter_indexes, drop_user_filter_indexes, elidable=False
        ),
        RunPython(
            create_login_record_indexes, drop_login_record_indexes, elidable=False
        ),
    ]
