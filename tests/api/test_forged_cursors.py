"""A list's `cursor` is its own, signed: one a client made up (a NUL byte, a lone surrogate,
a non-UUID tie, a number for a key), or one another list handed out, is a 400 naming
`cursor` on every list, never a 500 and never a row the caller may not see."""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import unquote

import pytest
from django.test import Client

from gloveapp.conversations.models import Session
from gloveapp.pages import views

pytestmark = pytest.mark.django_db


def forged(tie) -> str:
    """A cursor in the shape the lists once handed out, unsigned: base64 JSON [time, tie]."""
    raw = json.dumps(["2026-01-01T00:00:00+00:00", tie])  # ASCII: surrogates as \\ud800
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


FORGERIES = {
    "nul": forged("a\x00b"),
    "surrogate": forged("\ud800"),
    "non-uuid": forged("not-a-uuid"),
    "number": forged(5),
    "nested": forged(["x"]),
    "signed-shape": forged("x") + ":AAAA",
}


def _next(response) -> str:
    match = re.search(r'<([^>]+)>; rel="next"', response.get("Link", ""))
    assert match, response.get("Link")
    return match.group(1)


def _cursor_of(url: str) -> str:
    return re.search(r"cursor=([^&]+)", url).group(1)


@pytest.fixture
def sessions(owner, other_user):
    Session.objects.bulk_create(
        Session(id=f"o{n:02d}", key=f"o{n:02d}", owner=owner) for n in range(3)
    )
    Session.objects.bulk_create(
        Session(id=f"x{n:02d}", key=f"x{n:02d}", owner=other_user) for n in range(3)
    )


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_session_list_cursor_is_a_400_naming_it(owner_client, sessions, name):
    response = owner_client.get("/api/sessions", {"cursor": FORGERIES[name]})

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_inbox_cursor_is_a_400_naming_it(owner_client, session_id, name):
    response = owner_client.get(
        f"/api/sessions/{session_id}/inbox",
        {"status": "consumed", "limit": 5, "cursor": FORGERIES[name]},
    )

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_chat_list_cursor_is_a_400_naming_it(owner, sessions, name):
    browser = Client()
    browser.force_login(owner)

    response = browser.get("/", {"cursor": FORGERIES[name]})

    assert response.status_code == 400
    assert b"cursor" in response.content


def test_a_cursor_the_session_list_handed_out_still_pages(owner_client, sessions):
    first = owner_client.get("/api/sessions", {"limit": 2})

    second = owner_client.get(_next(first))

    assert second.status_code == 200
    assert [s["sessionId"] for s in second.json()] == ["o00"]


def test_the_chat_list_pages_with_the_cursor_it_hands_out(owner, sessions, monkeypatch):
    monkeypatch.setattr(views, "CHAT_LIST_PAGE", 2)
    browser = Client()
    browser.force_login(owner)

    first = browser.get("/").content.decode()
    cursor = unquote(re.search(r"\?cursor=([^\"&]+)", first).group(1))
    second = browser.get("/", {"cursor": cursor})

    assert second.status_code == 200
    assert "o00" in second.content.decode()
    assert "x0" not in second.content.decode()


def test_a_cursor_of_another_list_is_refused(owner_client, sessions, session_id):
    """A session list's cursor (its tie a chat's key) replayed on a session's inbox list."""
    handed = _cursor_of(owner_client.get("/api/sessions", {"limit": 1})["Link"])

    response = owner_client.get(
        f"/api/sessions/{session_id}/inbox", {"status": "consumed", "limit": 5, "cursor": handed}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"
