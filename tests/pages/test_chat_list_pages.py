"""The chat list `/`: one page of chats, newest first, whatever the number of chats, each
with the count of messages its person sent, read from the session row."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gloveapp.conversations.models import Session
from gloveapp.conversations.services import messages_append, session_create
from gloveapp.core.types import Message
from gloveapp.pages.views import CHAT_LIST_PAGE
from tests.pages.conftest import HTMX

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _chats(owner, count: int, *, start: int = 0) -> None:
    Session.objects.bulk_create(
        Session(id=f"u{owner.pk}-c{n:06d}", key=f"c{n:06d}", owner=owner, title=f"Chat {n}")
        for n in range(start, start + count)
    )


def _titles(html: str) -> list[str]:
    return re.findall(r'<span class="session-list__title">([^<]*)</span>', html)


def _next(html: str) -> str | None:
    match = re.search(r'hx-get="/\?cursor=([^"]+)"', html)
    return match.group(1) if match else None


def test_it_shows_one_page_of_chats_newest_first(owner, owner_client):
    _chats(owner, CHAT_LIST_PAGE + 5)

    html = owner_client.get("/").content.decode()

    titles = _titles(html)
    assert len(titles) == CHAT_LIST_PAGE
    newest = Session.objects.filter(owner=owner).order_by("-created_at", "-key").first()
    assert titles[0] == newest.title
    assert "More chats" in html


def test_it_walks_every_chat_once_through_the_more_rows(owner, owner_client):
    total = 2 * CHAT_LIST_PAGE + 7
    _chats(owner, total)
    # Ties on created_at are broken by the key, so no chat is shown twice or skipped.
    Session.objects.filter(owner=owner).update(created_at=Session.objects.first().created_at)

    seen = _titles(owner_client.get("/").content.decode())
    cursor = _next(owner_client.get("/").content.decode())
    while cursor:
        html = owner_client.get(f"/?cursor={cursor}", **HTMX).content.decode()
        assert "<html" not in html  # the rows alone, swapped in place of the "more" row
        seen += _titles(html)
        cursor = _next(html)

    assert len(seen) == total
    assert len(set(seen)) == total


def test_it_works_without_javascript_through_the_more_link(owner, owner_client):
    _chats(owner, CHAT_LIST_PAGE + 1)
    cursor = _next(owner_client.get("/").content.decode())

    html = owner_client.get(f"/?cursor={cursor}").content.decode()

    assert "<html" in html
    assert len(_titles(html)) == 1


def test_it_refuses_a_cursor_it_did_not_hand_out(owner_client):
    response = owner_client.get("/?cursor=not-a-cursor")

    assert response.status_code == 400
    assert b"cursor" in response.content


def test_it_counts_the_messages_the_person_sent(owner, owner_client):
    session = session_create(owner=owner, agent_name="coffee")
    messages_append(
        session_id=session.pk,
        messages=[
            Message(sender="user", text="A flat white, please."),
            Message(sender="agent", text="Coming up."),
            Message(sender="user", text="summary", is_compaction=True),
            Message(sender="user", text="And a croissant."),
        ],
    )

    html = owner_client.get("/").content.decode()

    assert "2 messages" in html


def test_it_never_lists_another_users_chats(owner, other_user, owner_client):
    _chats(other_user, 3)

    assert _titles(owner_client.get("/").content.decode()) == []


def test_its_queries_do_not_grow_with_the_number_of_chats(owner, owner_client):
    def queries_for_first_page() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert owner_client.get("/").status_code == 200
        sql = " ".join(query["sql"] for query in captured)
        assert "conversations_message" not in sql  # the counts come from the session rows
        assert "OFFSET" not in sql.upper()
        return len(captured)

    _chats(owner, 20)
    few = queries_for_first_page()
    _chats(owner, 2000, start=20)
    many = queries_for_first_page()

    assert many == few
