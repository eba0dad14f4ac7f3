"""The inbox in the Django admin: staff see pending items first and resolve them."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from gloveapp.conversations.services import messages_append, session_create, tasks_replace
from gloveapp.core.types import Message, Task
from gloveapp.live.models import LiveEvent
from inbox.models import InboxItem
from inbox.services import inbox_item_resolve
from tests.helpers import post_item, snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

CHANGELIST = "/admin/inbox/inboxitem/"


def change_url(item_id: str) -> str:
    return f"{CHANGELIST}{item_id}/change/"


@pytest.fixture
def owner() -> Client:
    user = get_user_model().objects.create_superuser("owner", "owner@brew.test", None)
    client = Client()
    client.force_login(user)
    client.user = user
    return client


def staff_with(*codenames: str) -> Client:
    user = get_user_model().objects.create_user("clerk", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("page", [CHANGELIST, "/admin/conversations/session/s1/change/"])
def test_it_keeps_customers_and_strangers_out(page):
    session_create(session_id="s1", title="Do you have Yirgacheffe?")
    customer = get_user_model().objects.create_user("customer")
    signed_in = Client()
    signed_in.force_login(customer)

    for client in (Client(), signed_in):
        answer = client.get(page)
        assert answer.status_code == 302
        assert "/admin/login/" in answer["Location"]


def test_it_lists_pending_items_first(owner):
    post_item("inbox_1_old_resolved", created_at="2030-01-01T09:00:00.000Z")
    post_item("inbox_2_pending", created_at="2030-01-01T10:00:00.000Z")
    post_item("inbox_3_new_resolved", created_at="2030-01-01T11:00:00.000Z")
    inbox_item_resolve(item_id="inbox_1_old_resolved", response="done")
    inbox_item_resolve(item_id="inbox_3_new_resolved", response="done")

    page = owner.get(CHANGELIST).content.decode()

    assert page.index("inbox_2_pending") < page.index("inbox_3_new_resolved")
    assert page.index("inbox_2_pending") < page.index("inbox_1_old_resolved")


@pytest.mark.parametrize(
    "query",
    ["status__exact=pending", "tag=restock_watch", "blocking__exact=1", "session__id__exact=s1"],
)
def test_it_filters_the_list(owner, query):
    post_item("inbox_1_a", session_id="s1", blocking=True)
    post_item("inbox_2_b", session_id="s2", tag="other")
    inbox_item_resolve(item_id="inbox_2_b", response="done")

    page = owner.get(f"{CHANGELIST}?{query}").content.decode()

    assert "inbox_1_a" in page
    assert "inbox_2_b" not in page


def test_it_resolves_an_item_from_its_page_and_records_the_staff_member(owner):
    post_item("inbox_1_a")
    assert 'name="resolution"' in owner.get(change_url("inbox_1_a")).content.decode()

    answer = owner.post(change_url("inbox_1_a"), {"resolution": "Back in stock", "_save": "Save"})

    assert answer.status_code == 302
    item = InboxItem.objects.get(pk="inbox_1_a")
    assert (item.status, item.response, item.resolved_by) == ("resolved", "Back in stock", "user")
    assert item.resolved_by_user == owner.user
    messages = [str(m) for m in owner.get(CHANGELIST).context["messages"]]
    assert 'Resolved inbox item "inbox_1_a".' in messages


def test_it_asks_for_a_response_and_changes_nothing_without_one(owner):
    post_item("inbox_1_a")
    before = snapshot()

    answer = owner.post(change_url("inbox_1_a"), {"resolution": "   ", "_save": "Save"})

    assert answer.status_code == 200
    assert "Enter the response to send to the agent." in answer.content.decode()
    assert snapshot() == before


def test_it_tells_a_late_staff_member_the_item_was_already_resolved(owner):
    post_item("inbox_1_a")
    owner.get(change_url("inbox_1_a"))
    inbox_item_resolve(
        item_id="inbox_1_a", response="the webhook was faster", resolved_by="webhook"
    )

    answer = owner.post(
        change_url("inbox_1_a"), {"resolution": "my answer", "_save": "Save"}, follow=True
    )

    assert "already resolved" in answer.content.decode()
    assert InboxItem.objects.get(pk="inbox_1_a").response == "the webhook was faster"


def test_it_offers_no_response_field_once_resolved(owner):
    post_item("inbox_1_a")
    inbox_item_resolve(item_id="inbox_1_a", response="done")

    page = owner.get(change_url("inbox_1_a")).content.decode()

    assert 'name="resolution"' not in page
    assert "done" in page


def test_it_resolves_many_items_with_one_response(owner):
    post_item("inbox_1_a", created_at="2030-01-01T10:00:00.000Z")
    post_item("inbox_2_b", created_at="2030-01-01T10:00:01.000Z")
    post_item("inbox_3_c", created_at="2030-01-01T10:00:02.000Z")
    inbox_item_resolve(item_id="inbox_3_c", response="earlier answer")
    selected = ["inbox_1_a", "inbox_2_b", "inbox_3_c"]

    confirm = owner.post(CHANGELIST, {"action": "resolve_selected", "_selected_action": selected})

    assert confirm.status_code == 200
    assert "One response resolves every selected item that is still pending (2 of 3)" in (
        confirm.content.decode()
    )
    assert InboxItem.objects.filter(status="pending").count() == 2

    done = owner.post(
        CHANGELIST,
        {
            "action": "resolve_selected",
            "_selected_action": selected,
            "apply": "1",
            "response": "All back in stock",
        },
        follow=True,
    )

    page = done.content.decode()
    assert "Resolved 2 inbox item(s)." in page
    assert "already resolved" in page
    responses = dict(InboxItem.objects.values_list("pk", "response"))
    assert responses == {
        "inbox_1_a": "All back in stock",
        "inbox_2_b": "All back in stock",
        "inbox_3_c": "earlier answer",
    }
    assert set(InboxItem.objects.values_list("resolved_by_user", flat=True)) == {
        owner.user.pk,
        None,
    }


def test_it_asks_again_when_the_bulk_response_is_empty(owner):
    post_item("inbox_1_a")
    before = snapshot()

    answer = owner.post(
        CHANGELIST,
        {
            "action": "resolve_selected",
            "_selected_action": ["inbox_1_a"],
            "apply": "1",
            "response": "",
        },
    )

    assert answer.status_code == 200
    assert "This field is required." in answer.content.decode()
    assert snapshot() == before


def test_it_lets_view_only_staff_look_but_not_resolve():
    post_item("inbox_1_a")
    viewer = staff_with("view_inboxitem")
    before = snapshot()

    page = viewer.get(change_url("inbox_1_a"))
    refused = viewer.post(change_url("inbox_1_a"), {"resolution": "x", "_save": "Save"})
    bulk = viewer.post(
        CHANGELIST,
        {
            "action": "resolve_selected",
            "_selected_action": ["inbox_1_a"],
            "apply": "1",
            "response": "x",
        },
    )

    assert page.status_code == 200
    assert 'name="resolution"' not in page.content.decode()
    assert refused.status_code == 403
    assert bulk.status_code in (200, 302)
    assert snapshot() == before


def test_it_shows_a_session_with_its_messages_and_tasks(owner):
    messages_append(
        session_id="s1", messages=[Message(sender="user", text="Do you have Yirgacheffe?")]
    )
    tasks_replace(session_id="s1", tasks=[Task("t1", "Watch the restock", "Watching the restock")])

    page = owner.get("/admin/conversations/session/s1/change/").content.decode()

    assert "Do you have Yirgacheffe?" in page
    assert "Watch the restock" in page


def test_it_shows_the_event_log_read_only(owner):
    post_item("inbox_1_a", session_id="s1")

    page = owner.get("/admin/live/liveevent/")

    assert page.status_code == 200
    assert "inbox.changed" in page.content.decode()
    assert owner.get("/admin/live/liveevent/add/").status_code == 403


def test_it_ignores_attempts_to_edit_an_item_by_hand(owner):
    post_item("inbox_1_a")

    owner.post(
        change_url("inbox_1_a"),
        {"resolution": "fine", "status": "consumed", "tag": "hacked", "_save": "Save"},
    )

    item = InboxItem.objects.get(pk="inbox_1_a")
    assert (item.status, item.tag, item.response) == ("resolved", "restock_watch", "fine")


def test_it_renames_a_session_through_the_service(owner):
    session_create(session_id="s1", title="untitled")
    formsets = {
        f"{prefix}-{field}": "0"
        for prefix in ("tasks", "messages")
        for field in ("TOTAL_FORMS", "INITIAL_FORMS")
    }

    answer = owner.post(
        "/admin/conversations/session/s1/change/", {"title": "Yirgacheffe watch", **formsets}
    )

    assert answer.status_code == 302
    event = LiveEvent.objects.filter(type="session.updated").latest("id")
    assert event.payload["session"]["title"] == "Yirgacheffe watch"


def test_it_styles_the_bulk_resolve_page_like_the_rest_of_the_admin(owner):
    post_item("inbox_1_a")
    changelist = owner.get(CHANGELIST).content.decode()

    confirm = owner.post(
        CHANGELIST, {"action": "resolve_selected", "_selected_action": ["inbox_1_a"]}
    ).content.decode()

    # Django's own pages draw breadcrumbs as an <ol>; a <div> of them is left unstyled.
    assert '<ol class="breadcrumbs">' in changelist
    assert '<ol class="breadcrumbs">' in confirm
    assert 'aria-current="page">Resolve inbox items</li>' in confirm


def test_it_shows_coffee_prices_as_money(owner):
    page = owner.get("/admin/demo/coffee/").content.decode()

    assert "Price cents" not in page and "PRICE CENTS" not in page
    assert "Price" in page
    assert re.search(r"\$\d+\.\d\d", page)
