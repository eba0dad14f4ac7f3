"""The migration operations the apps share (`gloveapp.lib.db.migrations`): the project's
models rendered only for code that reads them, once, and the operations written into a
migration file as what they are."""

from __future__ import annotations

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.db.migrations.state import ProjectState
from django.db.migrations.writer import OperationWriter
from django.db.models import Index
from django.utils.functional import cached_property

from gloveapp.lib.db.migrations import RunPython, add_index_if_absent

# SQLite's schema editor cannot open inside a test's transaction.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def run_forwards(operation, *, delayed: bool = False) -> ProjectState:
    state = ProjectState.from_apps(django_apps)
    # As in a migrate after an operation that reloaded a model lazily (AddIndex, AddField).
    state.is_delayed = delayed
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


def test_code_that_reads_models_twice_renders_them_once(monkeypatch):
    renders = []
    djangos = ProjectState.apps.func

    def counted(state):
        renders.append(state)
        return djangos(state)

    counting = cached_property(counted)
    counting.__set_name__(ProjectState, "apps")
    monkeypatch.setattr(ProjectState, "apps", counting)

    def read(apps, editor):
        apps.get_model("inbox", "InboxItem")
        apps.get_model("mesh", "MeshAgent")

    run_forwards(RunPython(read), delayed=True)
    assert len(renders) == 1


@pytest.mark.parametrize(
    "operation",
    [
        RunPython(RunPython.noop, RunPython.noop, elidable=True),
        add_index_if_absent("inbox", "inboxitem", Index(fields=["tag"], name="inbox_tag_idx")),
    ],
    ids=["RunPython", "AddIndexIfAbsent"],
)
def test_a_migration_file_names_the_operation_it_holds(operation):
    # As makemigrations or squashmigrations would write it: the class itself, importable.
    text, imports = OperationWriter(operation).serialize()
    cls = type(operation)
    assert text.strip().startswith(f"{cls.__module__}.{cls.__name__}(")
    assert f"import {cls.__module__}" in imports
