# The database cache's table (`glove_cache`), where every process counts its rate limits when
# no Redis is configured (gloveapp/live/cache.py). Made whatever CACHES says now, so a later
# switch from Redis to the database finds it; `createcachetable` skips an existing table.

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations

TABLE = "glove_cache"


def create(apps, schema_editor):
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, TABLE, dry_run=False)


def drop(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("live", "0001_initial")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
