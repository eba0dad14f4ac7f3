"""Inbox item ids are per session (issue 15): the runtime's store speaks its session's own
ids, and resolvers the global ones, which differ only where an id was already taken."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from gloveapp.conversations.services import session_create
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message as CoreMessage
from gloveapp.ormstore.store import DjangoStore
from inbox.models import InboxItem
from inbox.services import inbox_item_add, inbox_item_resolve

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def watch(request: str) -> CoreInboxItem:
    return CoreInboxItem(id="inbox_1_kenya", tag="restock_watch", request=request)


def two_sessions_with_one_item_id() -> tuple[str, str]:
    """Olive's and Oscar's sessions, each with an item their agent called inbox_1_kenya."""
    User = get_user_model()
    olives = session_create(owner=User.objects.create_user("olive"), session_id="glove_1")
    oscars = session_create(owner=User.objects.create_user("oscar"), session_id="glove_1")
    inbox_item_add(session_id=olives.id, item=watch("Olive's"))
    inbox_item_add(session_id=oscars.id, item=watch("Oscar's"))
    return olives.id, oscars.id


async def test_it_gives_the_runtime_store_its_sessions_own_item_ids():
    olives, oscars = await sync_to_async(two_sessions_with_one_item_id)()
    theirs = await InboxItem.objects.aget(session_id=oscars)
    assert theirs.id != "inbox_1_kenya"
    await sync_to_async(inbox_item_resolve)(
        item_id=theirs.id, response="Back.", resolved_by="command"
    )

    store = DjangoStore(oscars)
    assert [(i.id, i.request) for i in await store.get_resolved_inbox_items()] == [
        ("inbox_1_kenya", "Oscar's")
    ]
    await store.update_inbox_item("inbox_1_kenya", {"status": "consumed"})

    assert (await InboxItem.objects.aget(pk=theirs.id)).status == "consumed"
    assert (await InboxItem.objects.aget(pk="inbox_1_kenya")).session_id == olives
    assert (await InboxItem.objects.aget(pk="inbox_1_kenya")).status == "pending"
    assert [i.id for i in await DjangoStore(olives).get_inbox_items()] == ["inbox_1_kenya"]


async def test_it_injects_a_banner_naming_the_sessions_own_item_id():
    _, oscars = await sync_to_async(two_sessions_with_one_item_id)()
    theirs = await InboxItem.objects.aget(session_id=oscars)
    await sync_to_async(inbox_item_resolve)(
        item_id=theirs.id, response="Back.", resolved_by="command"
    )

    taken = []
    message = await DjangoStore(oscars).inject_resolved_inbox_items(
        lambda items: taken.extend(items) or CoreMessage(sender="user", text="banner")
    )

    assert message is not None
    assert [item.id for item in taken] == ["inbox_1_kenya"]
