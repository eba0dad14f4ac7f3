"""Per-owner ids (issue 15) arrived with a migration: every session and inbox item that
existed keeps its id as the id its owner (its session) knows it by, so every URL, token and
resolver that named it still does."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("conversations", "0004_session_last_seq"), ("inbox", "0002_workspace_inbox")]


def _migrate(targets):
    MigrationExecutor(connection).migrate(targets)
    return MigrationExecutor(connection).loader


def test_it_gives_every_existing_session_and_item_its_own_id_as_its_key(django_user_model):
    old = _migrate(BEFORE).project_state(BEFORE).apps
    owner = old.get_model("auth", "User").objects.create(username="olive")
    session = old.get_model("conversations", "Session").objects.create(id="old-1", owner=owner)
    old.get_model("inbox", "InboxItem").objects.create(
        id="inbox_1_old", session=session, tag="t", request="?", created_at=timezone.now()
    )

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    from gloveapp.conversations.access import owned_session_id
    from inbox.models import InboxItem

    olive = django_user_model.objects.get(username="olive")
    assert owned_session_id(olive, "old-1") == "old-1"
    assert list(InboxItem.objects.values_list("id", "key")) == [("inbox_1_old", "inbox_1_old")]
