"""Issue 22: a signed chat URL outlived a password change; API tokens could not be seen or
revoked by their owner. The URL is bound to the password now, and tokens have a page."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.api.test_chat import CHAT_BODY

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def ann():
    return get_user_model().objects.create_user("ann", password="old-pw-123456")


@pytest.fixture
def ann_browser(ann) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ann)
    return client


def _csrf(client: Client, url: str) -> str:
    page = client.get(url)
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())[1]


def _chat_url(ann) -> str:
    api = APIClient()
    api.force_authenticate(ann)
    created = api.post("/api/sessions", {"title": "Coffee"}, format="json")
    assert created.status_code == 201, created.json()
    minted = api.post(f"/api/sessions/{created.json()['sessionId']}/chat-url")
    assert minted.status_code == 200
    return minted.json()["path"]


def test_a_signed_chat_url_stops_working_when_the_password_changes(ann, ann_browser):
    path = _chat_url(ann)
    anonymous = APIClient()
    assert anonymous.post(path, CHAT_BODY, format="json").status_code == 200
    changed = ann_browser.post(
        "/accounts/password_change/",
        {
            "old_password": "old-pw-123456",
            "new_password1": "new-pw-654321-x",
            "new_password2": "new-pw-654321-x",
            "csrfmiddlewaretoken": _csrf(ann_browser, "/accounts/password_change/"),
        },
    )
    assert changed.status_code == 302, changed.content[:500]
    refused = anonymous.post(path, CHAT_BODY, format="json")
    assert refused.status_code == 401
    assert "before the password changed" in refused.json()["error"]
    # A URL minted under the new password works.
    ann.refresh_from_db()
    assert anonymous.post(_chat_url(ann), CHAT_BODY, format="json").status_code == 200


def test_the_owner_lists_and_revokes_an_api_token_from_the_chat_pages_menu(ann, ann_browser):
    token = Token.objects.create(user=ann)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get("/api/sessions").status_code == 200
    menu = ann_browser.get("/").content.decode()
    assert 'href="/accounts/tokens/"' in menu
    page = ann_browser.get("/accounts/tokens/").content.decode()
    assert token.key[:6] in page and token.key not in page  # shown by its start only
    token_id = re.search(r'name="token" value="([0-9a-f]+)"', page)[1]
    # Without the CSRF token the POST is refused, and the token stays.
    assert ann_browser.post("/accounts/tokens/revoke", {"token": token_id}).status_code == 403
    assert Token.objects.filter(pk=token.key).exists()
    revoked = ann_browser.post(
        "/accounts/tokens/revoke",
        {"token": token_id, "csrfmiddlewaretoken": _csrf(ann_browser, "/accounts/tokens/")},
    )
    assert revoked.status_code == 303
    assert not Token.objects.filter(pk=token.key).exists()
    assert api.get("/api/sessions").status_code == 401
    after = ann_browser.get("/accounts/tokens/").content.decode()
    assert "You have no API token." in after
    # The flash message (stored by the revoke, read once by the next page).
    assert "The token was revoked: it no longer opens the API." in after
    assert "The token was revoked" not in ann_browser.get("/accounts/tokens/").content.decode()


def test_nobody_else_can_revoke_a_users_token(ann, settings):
    token = Token.objects.create(user=ann)
    mallory = get_user_model().objects.create_user("mallory", password="pw-mallory-1")
    intruder = Client()
    intruder.force_login(mallory)
    from gloveapp.conversations.credentials import token_id

    intruder.post("/accounts/tokens/revoke", {"token": token_id(token.key)})
    assert Token.objects.filter(pk=token.key).exists()
    assert token.key[:6] not in intruder.get("/accounts/tokens/").content.decode()


def test_the_tokens_page_needs_a_login():
    response = Client().get("/accounts/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_owner_creates_a_token_on_the_page_and_sees_it_once(ann, ann_browser):
    page = ann_browser.get("/accounts/tokens/").content.decode()
    assert "Create a token" in page and "create_api_token" not in page
    # Without the CSRF token nothing is made.
    assert ann_browser.post("/accounts/tokens/new").status_code == 403
    assert not Token.objects.filter(user=ann).exists()

    made = ann_browser.post(
        "/accounts/tokens/new", {"csrfmiddlewaretoken": _csrf(ann_browser, "/accounts/tokens/")}
    )
    assert made.status_code == 200 and "no-store" in made["Cache-Control"]
    key = Token.objects.get(user=ann).key
    assert f'value="{key}"' in made.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/sessions").status_code == 200
    # Shown once: the list names it by its start only from now on.
    again = ann_browser.get("/accounts/tokens/").content.decode()
    assert key not in again and key[:6] in again and "Replace with a new token" in again

    # A new one replaces it: the old key stops opening the API.
    replaced = ann_browser.post(
        "/accounts/tokens/new", {"csrfmiddlewaretoken": _csrf(ann_browser, "/accounts/tokens/")}
    )
    new_key = Token.objects.get(user=ann).key
    assert new_key != key and f'value="{new_key}"' in replaced.content.decode()
    assert "replaces the old one" in replaced.content.decode()
    assert api.get("/api/sessions").status_code == 401


def test_creating_a_token_needs_a_login_and_a_post():
    assert Client().post("/accounts/tokens/new").status_code == 302
    client = Client()
    client.force_login(get_user_model().objects.create_user("bo", password="pw-bo-12345"))
    assert client.get("/accounts/tokens/new").status_code == 405
