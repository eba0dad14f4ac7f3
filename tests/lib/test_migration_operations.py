"""The migration operations the apps share (`gloveapp.lib.db.migrations`): the same schema
as Django's own operations, and the project's models rendered only for code that reads
them."""

from __future__ import annotations

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.db.migrations.state import ProjectState

from gloveapp.lib.db.migrations import RunPython

# SQLite's schema editor cannot open inside a test's transaction.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def run_forwards(operation) -> ProjectState:
    state = ProjectState.from_apps(django_apps)
    with connection.schema_editor(atomic=True) as editor:
        operation.database_forwards("inbox", editor, state, state.clone())
    return state


def test_code_that_reads_no_model_renders_none():
    seen = []
    state = run_forwards(RunPython(lambda apps, editor: seen.append(editor.connection.vendor)))
    assert seen == [connection.vendor]
    assert "apps" not in state.__dict__  # never rendered


def test_code_that_reads_a_model_gets_the_historical_one():
    seen = []

    def read(apps, editor):
        model = apps.get_model("inbox", "InboxItem")
        seen.append((model._meta.db_table, model.__module__))

    run_forwards(RunPython(read, RunPython.noop))
    assert seen == [("inbox_inboxitem", "__fake__")]  # the migration state's, not the app's


def test_it_is_written_as_djangos_runpython():
    name, _args, kwargs = RunPython(RunPython.noop, RunPython.noop, elidable=True).deconstruct()
    assert name == "migrations.RunPython"
    assert kwargs["elidable"] is True
