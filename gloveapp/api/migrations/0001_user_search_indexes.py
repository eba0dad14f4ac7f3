"""Trigram indexes for the users admin's search (`gloveapp/api/admin.py`): its `%term%` on the
username, names and e-mail read every user without them (2.2x slower at 10,000 users than at
100, in bench/scale.py). PostgreSQL only; nothing in the models' state."""

from django.db import migrations

from gloveapp.lib.db.migrations import trigram_index_operations

SEARCHED = ("username", "first_name", "last_name", "email")


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        operation
        for column in SEARCHED
        for operation in trigram_index_operations(
            table="auth_user", column=column, name=f"glove_user_{column}_trgm_idx"
        )
    ]
