# The mesh's sender and delivery records become partitioned by day on PostgreSQL
# (gloveapp/lib/db/partitions.py): retention drops whole days instead of deleting rows. "One sender
# per message id" and "one delivery per message and recipient" stay: a unique index per
# day, and across days the advisory lock every writer takes on the key (`mesh.services`).
# SQLite keeps the plain tables and their keys. Reversible: the reverse puts the rows back
# in plain tables with their keys.

from django.db import migrations

from gloveapp.lib.db.partitions import partition_table, unpartition_table

SENDERS = "mesh_meshsentmessage"
SENDERS_UNIQUE = (("mesh_one_sender_per_message", ("message_id",)),)
DELIVERIES = "mesh_meshdelivery"
DELIVERIES_UNIQUE = (("mesh_delivery_once_per_recipient", ("message_id", "recipient")),)


def forwards(apps, schema_editor):
    partition_table(
        schema_editor, table=SENDERS, column="created_at", key="message_id", unique=SENDERS_UNIQUE
    )
    partition_table(
        schema_editor, table=DELIVERIES, column="delivered_at", unique=DELIVERIES_UNIQUE
    )


def backwards(apps, schema_editor):
    unpartition_table(schema_editor, table=SENDERS, key="message_id", unique=SENDERS_UNIQUE)
    unpartition_table(schema_editor, table=DELIVERIES, unique=DELIVERIES_UNIQUE)


class Migration(migrations.Migration):
    atomic = True

    dependencies = [
        ("mesh", "0002_refusals"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
