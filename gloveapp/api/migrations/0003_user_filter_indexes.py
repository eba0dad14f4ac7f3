# The users admin's filters on a rare value (staff, superusers, inactive users: a handful of
# a million), in its order (the username): partial indexes over those few rows. Without them
# `?is_staff__exact=1` walked every user in username order to fill a page. Outside the
# models' state (the user model is Django's); IF NOT EXISTS, so they may be built beforehand
# with CREATE INDEX CONCURRENTLY under the same names (docs/howto/deploy.md).

from django.db import migrations

PARTIAL = {
    "glove_user_staff_idx": "is_staff",
    "glove_user_superuser_idx": "is_superuser",
    "glove_user_inactive_idx": "NOT is_active",
}


def create(apps, schema_editor):
    for name, condition in PARTIAL.items():
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON "auth_user" ("username") WHERE {condition}'
        )


def drop(apps, schema_editor):
    for name in PARTIAL:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0002_token_webhook"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
