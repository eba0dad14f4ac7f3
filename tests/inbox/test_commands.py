"""`manage.py resolve_inbox_item` and `manage.py inbox_pending`."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from inbox.models import InboxItem
from inbox.services import inbox_item_resolve
from tests.helpers import post_item, snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_resolves_an_item_from_the_command_line():
    post_item("inbox_1_a", session_id="s1")

    output = run("resolve_inbox_item", "inbox_1_a", "Back in stock (12 bags).")

    assert 'Resolved inbox item "inbox_1_a" [restock_watch] of session s1.' in output
    item = InboxItem.objects.get(pk="inbox_1_a")
    assert (item.status, item.response, item.resolved_by) == (
        "resolved",
        "Back in stock (12 bags).",
        "command",
    )


def test_it_reads_the_response_from_stdin_when_told(monkeypatch):
    post_item("inbox_1_a")
    monkeypatch.setattr("sys.stdin", io.StringIO("A long answer\nover two lines\n"))

    run("resolve_inbox_item", "inbox_1_a", "-")

    assert InboxItem.objects.get(pk="inbox_1_a").response == "A long answer\nover two lines"


def test_it_fails_with_status_3_for_an_unknown_item():
    before = snapshot()

    with pytest.raises(CommandError, match='No inbox item with id "inbox_nope"') as failure:
        run("resolve_inbox_item", "inbox_nope", "x")

    assert failure.value.returncode == 3
    assert snapshot() == before


def test_it_fails_with_status_4_when_the_item_is_not_pending():
    post_item("inbox_1_a")
    inbox_item_resolve(item_id="inbox_1_a", response="first")

    with pytest.raises(CommandError, match="already resolved") as failure:
        run("resolve_inbox_item", "inbox_1_a", "second")

    assert failure.value.returncode == 4
    assert InboxItem.objects.get(pk="inbox_1_a").response == "first"


def test_it_fails_with_status_1_for_an_empty_response():
    post_item("inbox_1_a")
    before = snapshot()

    with pytest.raises(CommandError, match="response must not be empty") as failure:
        run("resolve_inbox_item", "inbox_1_a", "  ")

    assert failure.value.returncode == 1
    assert snapshot() == before


def test_it_lists_what_waits():
    post_item("inbox_1_a", session_id="s1", created_at="2030-01-01T10:00:00.000Z")
    post_item(
        "inbox_2_b",
        session_id="s2",
        tag="payment_confirmation",
        request="Confirm payment for order #1042",
        blocking=True,
        created_at="2030-01-01T11:00:00.000Z",
    )
    post_item("inbox_3_c", session_id="s1", created_at="2030-01-01T12:00:00.000Z")
    inbox_item_resolve(item_id="inbox_3_c", response="done")

    output = run("inbox_pending")

    assert output.index("inbox_1_a") < output.index("inbox_2_b")
    assert "inbox_3_c" not in output
    assert "[payment_confirmation] BLOCKING  session s2" in output
    assert "Confirm payment for order #1042" in output
    assert "2 pending item(s)." in output


def test_it_lists_pending_items_as_json_with_filters():
    post_item("inbox_1_a", session_id="s1")
    post_item("inbox_2_b", session_id="s2", blocking=True)

    rows = json.loads(run("inbox_pending", "--json", "--session", "s2"))

    assert rows == [
        {
            "id": "inbox_2_b",
            "key": "inbox_2_b",
            "sessionId": "s2",
            "tag": "restock_watch",
            "request": "Notify when Yirgacheffe is back in stock",
            "blocking": True,
            "createdAt": "2030-01-01T10:00:00.000Z",
            "expiresAt": None,
        }
    ]
    assert [r["id"] for r in json.loads(run("inbox_pending", "--json", "--blocking"))] == [
        "inbox_2_b"
    ]


def test_it_says_so_when_nothing_waits():
    assert "No pending inbox items." in run("inbox_pending")
