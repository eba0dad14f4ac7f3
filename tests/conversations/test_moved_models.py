"""Models that changed app (issue 9) kept their tables: a database migrated under the old
layout keeps its rows, and its admin permissions, after `migrate`."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

# The layout before the move: LiveEvent in conversations, the coffee shop in agents.
OLD = [
    ("conversations", "0001_initial"),
    ("agents", "0001_initial"),
    ("live", None),
    ("demo", None),
]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader


def _latest():
    loader = MigrationExecutor(connection).loader
    return loader.graph.leaf_nodes()


def test_it_keeps_the_rows_and_permissions_of_models_that_moved_app():
    loader = _migrate(OLD)
    old = loader.project_state(OLD[:2]).apps
    session = old.get_model("conversations", "Session").objects.create(id="old-1")
    old.get_model("conversations", "LiveEvent").objects.create(
        stream="session:old-1", type="session.updated", payload={"a": 1}
    )
    old.get_model("agents", "Coffee").objects.create(sku="k1", name="K", price_cents=9, stock=3)
    old.get_model("agents", "Order").objects.create(
        session=session, lines=[], total_cents=9, payment="pickup"
    )
    # As the old layout's post_migrate left it: the shop's content types under "agents".
    ContentType.objects.filter(app_label="demo", model="coffee").delete()
    coffee_type = ContentType.objects.get_or_create(app_label="agents", model="coffee")[0]
    ContentType.objects.clear_cache()

    _migrate(_latest())

    from gloveapp.demo.models import Coffee, Order
    from gloveapp.live.models import LiveEvent

    assert list(LiveEvent.objects.values_list("stream", "payload")) == [("session:old-1", {"a": 1})]
    assert list(Coffee.objects.values_list("sku", "stock")) == [("k1", 3)]
    assert Order.objects.get().session_id == "old-1"
    # The content type moved with its model, so permissions given under the old app hold.
    ContentType.objects.clear_cache()
    assert ContentType.objects.get(pk=coffee_type.pk).app_label == "demo"
    # The id sequence carried over too: a new event takes the next id.
    assert LiveEvent.objects.create(stream="session:old-1", seq=1, type="x", payload={}).pk > 1
