"""Who sees which chat page: the owner, staff reading along, and nobody else."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from gloveapp.conversations.models import Session
from gloveapp.conversations.services import session_create
from tests.pages.conftest import HTMX, client_for

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_it_sends_anonymous_visitors_to_the_login_page(session):
    for url in ["/", f"/sessions/{session.pk}/"]:
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_it_refuses_anonymous_posts(session):
    response = Client().post(f"/sessions/{session.pk}/messages", {"text": "hello"})
    assert response.status_code == 302
    assert session.messages.count() == 0


def test_it_renders_the_login_page():
    response = Client().get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content
    assert b'name="password"' in response.content


def test_it_logs_in_with_the_form_and_lands_on_the_session_list(owner):
    from tests.pages.conftest import PASSWORD

    client = Client()
    response = client.post(
        "/accounts/login/", {"username": "olive", "password": PASSWORD}, follow=True
    )
    assert response.redirect_chain[-1][0] == "/"
    assert b"Chats" in response.content


def test_it_lists_only_the_owners_sessions_newest_first(owner, other_user, owner_client):
    first = session_create(owner=owner, agent_name="coffee", title="First latte")
    second = session_create(owner=owner, agent_name="coffee", title="Second latte")
    session_create(owner=other_user, agent_name="coffee", title="Oscar's espresso")

    html = owner_client.get("/").content.decode()

    assert "Oscar&#x27;s espresso" not in html and "Oscar's espresso" not in html
    assert html.index(second.title) < html.index(first.title)
    assert f'href="/sessions/{first.pk}/"' in html


def test_it_starts_a_new_coffee_chat_and_redirects_to_it(owner, owner_client):
    response = owner_client.post("/sessions/new")

    session = Session.objects.get(owner=owner)
    assert session.agent_name == "coffee"
    assert response.status_code == 303
    assert response["Location"] == f"/sessions/{session.pk}/"


def test_it_redirects_htmx_to_the_new_chat_with_a_client_redirect(owner, owner_client):
    response = owner_client.post("/sessions/new", **HTMX)

    session = Session.objects.get(owner=owner)
    assert response["HX-Redirect"] == f"/sessions/{session.pk}/"


def test_it_does_not_create_a_chat_on_get(owner, owner_client):
    response = owner_client.get("/sessions/new")
    assert response.status_code == 405
    assert not Session.objects.filter(owner=owner).exists()


def test_it_shows_the_owner_their_chat_page(session, owner_client):
    response = owner_client.get(f"/sessions/{session.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Morning order" in html
    assert 'id="composer"' in html


def test_it_answers_another_users_session_as_not_found(session, other_user):
    client = client_for(other_user)
    assert client.get(f"/sessions/{session.pk}/").status_code == 404
    assert client.post(f"/sessions/{session.pk}/messages", {"text": "hi"}).status_code == 404
    assert client.post(f"/sessions/{session.pk}/slots/slot_1", {"value": "once"}).status_code == 404
    assert session.messages.count() == 0


def test_it_answers_an_unknown_session_as_not_found(owner_client):
    assert owner_client.get("/sessions/glove_nope/").status_code == 404


def test_it_lets_staff_read_a_users_chat_without_a_composer(session, staff):
    client = client_for(staff)

    response = client.get(f"/sessions/{session.pk}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "Morning order" in html
    assert "read only" in html
    assert 'id="composer"' not in html


def test_it_does_not_let_staff_speak_for_the_owner(session, staff):
    response = client_for(staff).post(f"/sessions/{session.pk}/messages", {"text": "hi"})
    assert response.status_code == 404
    assert session.messages.count() == 0


def test_it_serves_htmx_from_the_app_not_a_cdn(session, owner_client):
    html = owner_client.get(f"/sessions/{session.pk}/").content.decode()
    assert '<script src="/static/vendor/htmx-2.0.11.min.js"' in html
    # Every script the page loads is served by the app itself.
    sources = re.findall(r'<script[^>]*\ssrc="([^"]+)"', html)
    assert sources and all(src.startswith("/static/") for src in sources), sources


def test_it_finds_the_vendored_htmx_and_live_script_among_static_files():
    from django.contrib.staticfiles import finders

    htmx = finders.find("vendor/htmx-2.0.11.min.js")
    assert htmx and open(htmx, encoding="utf-8").read().startswith("var htmx=")
    assert finders.find("glove/live.js")


def test_it_serves_each_user_their_own_chat_under_one_id(session, other_user, owner_client):
    # Ids are per owner: Oscar's chat may have Olive's id, and his pages are his.
    theirs = session_create(owner=other_user, session_id=session.key, title="Oscar's tea")
    client = client_for(other_user)

    html = client.get(f"/sessions/{session.key}/").content.decode()

    assert "Oscar&#x27;s tea" in html and "Morning order" not in html
    assert f'data-live-url="/ws/sessions/{session.key}/"' in html
    assert theirs.pk not in html  # the page names it only by his own id
    sent = client.post(f"/sessions/{session.key}/messages", {"text": "A pot of Darjeeling"})
    assert sent.status_code == 303 and sent["Location"] == f"/sessions/{session.key}/"
    assert theirs.turns.count() == 1 and session.turns.count() == 0
    assert "Morning order" in owner_client.get(f"/sessions/{session.key}/").content.decode()
    assert f'href="/sessions/{session.key}/"' in client.get("/").content.decode()


def test_it_lets_staff_read_a_chat_made_under_a_taken_id_by_its_global_id(
    session, other_user, staff
):
    theirs = session_create(owner=other_user, session_id=session.key, title="Oscar's tea")

    html = client_for(staff).get(f"/sessions/{theirs.pk}/").content.decode()

    assert "Oscar&#x27;s tea" in html and "read only" in html
    assert f'data-live-url="/ws/sessions/{theirs.pk}/"' in html
