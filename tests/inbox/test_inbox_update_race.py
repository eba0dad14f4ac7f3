"""`inbox_item_update` racing a staff resolution must not lose the staff's answer.

The update is stopped right after it has read the item; a resolution then runs in another
thread, on its own connection, and is given the chance to commit in that window. Whatever
order the two end in, an item that says "resolved" carries the staff's response.
"""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

import inbox.services as inbox_services
from gloveapp.core.store import InboxTransitionError
from inbox.models import InboxItem
from inbox.services import inbox_item_resolve, inbox_item_update
from tests.helpers import post_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def update_racing_a_resolution(monkeypatch, updates: dict) -> tuple[object, object]:
    """Run `inbox_item_update(updates)` with a staff resolution let loose after its read."""
    staff = get_user_model().objects.create_user("barista", is_staff=True)
    outcome: dict[str, object] = {}

    def resolve() -> None:
        try:
            outcome["resolve"] = inbox_item_resolve(
                item_id="inbox_1_watch", response="Back in stock", resolved_by="user", user=staff
            )
        except Exception as exc:
            outcome["resolve"] = exc
        finally:
            connections.close_all()

    resolver = threading.Thread(target=resolve)
    checked = inbox_services.check_inbox_transition

    def check_then_let_the_resolution_in(item, changes):
        checked(item, changes)
        if not resolver.is_alive() and "resolve" not in outcome:
            resolver.start()
            resolver.join(timeout=1)  # commits here unless the update holds the row

    monkeypatch.setattr(inbox_services, "check_inbox_transition", check_then_let_the_resolution_in)
    try:
        outcome["update"] = inbox_item_update(
            session_id="coffee_session", item_id="inbox_1_watch", updates=updates
        )
    except Exception as exc:
        outcome["update"] = exc
    resolver.join(timeout=60)
    assert not resolver.is_alive(), "the resolution hung"
    return outcome["update"], outcome["resolve"]


def test_it_keeps_the_staff_response_when_an_empty_update_races_the_resolution(monkeypatch):
    post_item("inbox_1_watch")

    update, resolve = update_racing_a_resolution(monkeypatch, {})

    assert not isinstance(update, Exception), update
    assert not isinstance(resolve, Exception), resolve
    stored = InboxItem.objects.get(pk="inbox_1_watch")
    assert (stored.status, stored.response, stored.resolved_by) == (
        "resolved",
        "Back in stock",
        "user",
    )
    assert stored.resolved_at is not None


def test_it_lets_exactly_one_of_a_withdrawal_and_a_resolution_win(monkeypatch):
    post_item("inbox_1_watch")

    update, resolve = update_racing_a_resolution(monkeypatch, {"status": "consumed"})

    stored = InboxItem.objects.get(pk="inbox_1_watch")
    if stored.status == "resolved":
        assert isinstance(update, InboxTransitionError), update
        assert (stored.response, stored.resolved_by) == ("Back in stock", "user")
        assert stored.resolved_at is not None
    else:
        assert stored.status == "consumed"
        assert isinstance(resolve, InboxTransitionError), resolve
        assert "already consumed" in str(resolve)
        assert (stored.response, stored.resolved_at) == (None, None)
