"""`inbox.services.inbox_item_resolve`: the one resolution every path calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from gloveapp.core.store import InboxItemNotFound, InboxTransitionError
from gloveapp.live.models import LiveEvent
from inbox.models import InboxItem
from inbox.services import (
    ainbox_item_resolve,
    expire_inbox_items,
    inbox_item_resolve,
    inbox_items_consume_resolved,
)
from tests.helpers import post_item, run_in_threads, snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_it_resolves_a_pending_item_and_records_who_did_it():
    staff = get_user_model().objects.create_user("barista", is_staff=True)
    post_item("inbox_1_a")

    item = inbox_item_resolve(
        item_id="inbox_1_a", response="Back in stock (12 bags).", resolved_by="user", user=staff
    )

    item.refresh_from_db()
    assert (item.status, item.response, item.resolved_by) == (
        "resolved",
        "Back in stock (12 bags).",
        "user",
    )
    assert item.resolved_by_user == staff
    assert item.resolved_at is not None


def test_it_announces_the_resolution_in_the_same_transaction():
    post_item("inbox_1_a", session_id="s1")

    inbox_item_resolve(item_id="inbox_1_a", response="Back in stock", resolved_by="command")

    event = LiveEvent.objects.filter(type="inbox.changed").latest("id")
    assert event.stream == "session:s1"
    assert event.payload["resolved_by"] == "command"
    assert event.payload["item"]["id"] == "inbox_1_a"
    assert event.payload["item"]["status"] == "resolved"
    assert event.payload["item"]["response"] == "Back in stock"
    assert event.payload["item"]["resolved_at"].endswith("Z")


def test_it_reports_an_unknown_item_as_not_found_and_changes_nothing():
    post_item("inbox_1_a")
    before = snapshot()

    with pytest.raises(InboxItemNotFound, match='"inbox_nope"'):
        inbox_item_resolve(item_id="inbox_nope", response="whatever")

    assert snapshot() == before


def test_it_reports_already_resolved_and_keeps_the_first_response():
    post_item("inbox_1_a")
    inbox_item_resolve(item_id="inbox_1_a", response="first", resolved_by="webhook")
    before = snapshot()

    with pytest.raises(InboxTransitionError, match="already resolved") as refused:
        inbox_item_resolve(item_id="inbox_1_a", response="second", resolved_by="command")

    assert refused.value.current_status == "resolved"
    assert snapshot() == before


def test_it_reports_already_consumed_for_an_item_the_agent_has_read():
    post_item("inbox_1_a", session_id="s1")
    inbox_item_resolve(item_id="inbox_1_a", response="first")
    inbox_items_consume_resolved(session_id="s1")

    with pytest.raises(InboxTransitionError, match="already consumed") as refused:
        inbox_item_resolve(item_id="inbox_1_a", response="again")

    assert refused.value.current_status == "consumed"
    assert InboxItem.objects.get(pk="inbox_1_a").response == "first"


@pytest.mark.parametrize(
    ("item_id", "response", "options", "complaint"),
    [
        ("inbox_1_a", "", {}, "response must not be empty"),
        ("inbox_1_a", "   \n", {}, "response must not be empty"),
        ("inbox_1_a", None, {}, "response must be a string"),
        ("inbox_1_a", 42, {}, "response must be a string"),
        ("inbox_1_a", "nul \x00 byte", {}, "NUL"),
        ("", "ok", {}, "itemId must not be empty"),
        (None, "ok", {}, "itemId must be a string"),
        ("x" * 129, "ok", {}, "longer than 128"),
        ("inbox_1_a", "ok", {"resolved_by": "someone"}, "resolved_by must be one of"),
        ("inbox_1_a", "ok", {"user": object()}, "user must be a saved user"),
    ],
)
def test_it_refuses_bad_input_and_changes_nothing(item_id, response, options, complaint):
    post_item("inbox_1_a")
    before = snapshot()

    with pytest.raises(ValueError, match=complaint):
        inbox_item_resolve(item_id=item_id, response=response, **options)

    assert snapshot() == before


@pytest.mark.django_db(transaction=True)
async def test_it_can_be_awaited():
    from asgiref.sync import sync_to_async

    await sync_to_async(post_item)("inbox_1_a")

    item = await ainbox_item_resolve(
        item_id="inbox_1_a", response="from async code", resolved_by="mesh"
    )

    assert (item.status, item.resolved_by) == ("resolved", "mesh")


def test_it_still_answers_to_its_old_name_with_a_deprecation_warning():
    from inbox.services import resolve_inbox_item

    post_item("inbox_1_a")

    with pytest.warns(DeprecationWarning, match="inbox_item_resolve") as caught:
        item = resolve_inbox_item("inbox_1_a", "Back in stock", resolved_by="command")

    assert (item.status, item.response, item.resolved_by) == (
        "resolved",
        "Back in stock",
        "command",
    )
    # The warning points at the caller, not at inbox/services.py.
    assert caught[0].filename == __file__


@pytest.mark.django_db(transaction=True)
async def test_it_still_answers_to_its_old_async_name_with_a_deprecation_warning():
    from asgiref.sync import sync_to_async

    from inbox.services import aresolve_inbox_item

    await sync_to_async(post_item)("inbox_1_a")

    with pytest.warns(DeprecationWarning, match="ainbox_item_resolve"):
        item = await aresolve_inbox_item("inbox_1_a", "from async code", resolved_by="mesh")

    assert (item.status, item.resolved_by) == ("resolved", "mesh")


@pytest.mark.django_db(transaction=True)
def test_it_lets_exactly_one_of_fifty_concurrent_resolvers_win(requires_postgres):
    post_item("inbox_1_race")

    outcomes = run_in_threads(
        50,
        lambda n: inbox_item_resolve(
            item_id="inbox_1_race", response=f"resolver {n}", resolved_by="webhook"
        ),
    )

    winners = [o for o in outcomes if isinstance(o, InboxItem)]
    losers = [o for o in outcomes if isinstance(o, InboxTransitionError)]
    assert len(winners) == 1
    assert len(losers) == 49
    assert all("already resolved" in str(loser) for loser in losers)
    stored = InboxItem.objects.get(pk="inbox_1_race")
    assert stored.response == winners[0].response
    assert (
        LiveEvent.objects.filter(type="inbox.changed", payload__item__status="resolved").count()
        == 1
    )


# -- expiry -------------------------------------------------------------------------------


def test_it_expires_overdue_items_with_a_clear_response():
    past = datetime.now(UTC) - timedelta(minutes=1)
    post_item("inbox_1_overdue", expires_at=past)
    post_item("inbox_2_later", expires_at=datetime.now(UTC) + timedelta(hours=1))
    post_item("inbox_3_never")

    assert expire_inbox_items() == 1

    overdue = InboxItem.objects.get(pk="inbox_1_overdue")
    assert (overdue.status, overdue.resolved_by) == ("resolved", "expiry")
    assert overdue.response.startswith("Expired: no response arrived by ")
    assert InboxItem.objects.get(pk="inbox_2_later").status == "pending"
    assert InboxItem.objects.get(pk="inbox_3_never").status == "pending"
    assert expire_inbox_items() == 0


def test_it_never_expires_an_item_someone_already_resolved():
    post_item("inbox_1_overdue", expires_at=datetime.now(UTC) - timedelta(minutes=1))
    inbox_item_resolve(item_id="inbox_1_overdue", response="answered in time")

    assert expire_inbox_items() == 0
    assert InboxItem.objects.get(pk="inbox_1_overdue").response == "answered in time"


def test_it_expires_from_the_command_line(capsys):
    post_item("inbox_1_overdue", expires_at=datetime.now(UTC) - timedelta(seconds=1))

    call_command("expire_inbox_items")

    assert "Expired 1 inbox item(s)." in capsys.readouterr().out
    assert InboxItem.objects.get(pk="inbox_1_overdue").resolved_by == "expiry"
