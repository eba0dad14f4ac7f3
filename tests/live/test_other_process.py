"""A change made outside the server (a management command, another process) reaches the
owner's socket: the committed row is the message, the wake-up only makes it quick."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from inbox.models import InboxItem
from tests.live.conftest import frames, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
# Long enough that only a wake-up (Redis pub/sub, PostgreSQL NOTIFY) can deliver in time.
SLEEPY_POLL_SECONDS = 60


@pytest.fixture
def pending_item(chat) -> InboxItem:
    return InboxItem.objects.create(
        id="inbox_1_coffee",
        key="inbox_1_coffee",
        session=chat,
        tag="approve_order",
        request="Two espressos?",
        created_at=timezone.now(),
    )


@pytest.fixture
def wake_ups(layer, settings) -> bool:
    """Whether another process can wake this one's relay; if so, polling is turned down."""
    can_wake = layer == "redis" or connection.vendor == "postgresql"
    if can_wake:
        settings.GLOVE_LIVE_POLL_SECONDS = SLEEPY_POLL_SECONDS
    return can_wake


async def test_it_pushes_a_resolution_made_by_the_management_command(
    layer, chat, pending_item, owner_cookie
):
    communicator = await open_socket(chat.id, owner_cookie)

    await database_sync_to_async(call_command)("resolve_inbox_item", pending_item.id, "Yes")

    [frame] = await frames(communicator, 1)
    assert frame["type"] == "inbox.changed"
    assert frame["payload"]["resolved_by"] == "command"
    assert frame["payload"]["item"]["id"] == pending_item.id
    await communicator.disconnect()


@pytest.mark.process
async def test_it_pushes_a_resolution_made_in_another_process(
    layer, wake_ups, settings, chat, pending_item, owner_cookie
):
    communicator = await open_socket(chat.id, owner_cookie)

    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "manage.py", "resolve_inbox_item", pending_item.id, "Yes please"],
        cwd=ROOT,
        env=_environment_of_this_test(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr

    [frame] = await frames(communicator, 1)
    assert frame["type"] == "inbox.changed"
    assert frame["payload"]["item"]["response"] == "Yes please"
    assert frame["payload"]["resolved_by"] == "command"
    await communicator.disconnect()


def _environment_of_this_test(settings) -> dict[str, str]:
    """The other process uses this test's database and Redis, like a second server would."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["DATABASE_URL"] = _database_url(connection.settings_dict)
    if settings.REDIS_URL:
        env["REDIS_URL"] = settings.REDIS_URL
    return env


def _database_url(db: dict) -> str:
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    auth = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"], safe="")
    return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"
