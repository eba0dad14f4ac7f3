"""Same-origin JSON `fetch` with the session cookie needs no CSRF token; nothing else changes.

The rule (gloveapp/api/common/auth.py): `Content-Type: application/json` and an `Origin` equal to
the site's (or, with no Origin, `Sec-Fetch-Site: same-origin`). Everything else keeps
Django's CSRF check, so these clients enforce it as a browser-facing server would.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from tests.helpers import post_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

SITE = "http://testserver"
MESSAGE = {"messages": [{"sender": "user", "text": "hi"}]}


@pytest.fixture
def browser(owner) -> APIClient:
    """The owner's browser: logged in by the Django session, CSRF enforced."""
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    return client


def post(client, path, body, content_type="application/json", **headers):
    data = json.dumps(body) if content_type == "application/json" else body
    return client.generic("POST", path, data, content_type=content_type, **headers)


def messages(session_id):
    return f"/api/sessions/{session_id}/messages"


def test_it_accepts_same_origin_json_without_a_csrf_token(browser, session_id):
    response = post(browser, messages(session_id), MESSAGE, HTTP_ORIGIN=SITE)
    assert response.status_code == 200
    assert browser.get(messages(session_id)).json() == MESSAGE["messages"]


def test_it_accepts_sec_fetch_site_same_origin_when_there_is_no_origin(browser, session_id):
    response = post(browser, messages(session_id), MESSAGE, HTTP_SEC_FETCH_SITE="same-origin")
    assert response.status_code == 200


@pytest.mark.parametrize(
    "route",
    [
        "tokens",
        "turns",
        "reset-counters",
        "tasks",
        "permissions",
        "inbox",
        "inbox/update",
        "inbox/consume",
    ],
)
def test_it_lets_same_origin_json_reach_every_store_route(browser, session_id, route):
    # Bodies are left empty: passing the CSRF gate shows as a 400/404 from the view, not a 403.
    response = post(browser, f"/api/sessions/{session_id}/{route}", {}, HTTP_ORIGIN=SITE)
    assert response.status_code != 403, response.json()


def test_it_lets_same_origin_json_call_the_chat_endpoint(browser):
    body = {"systemPrompt": "", "messages": [{"sender": "user", "text": "hi"}]}
    response = post(browser, "/api/chat", body, HTTP_ORIGIN=SITE)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_ORIGIN": "http://evil.example"},
        {"HTTP_ORIGIN": "https://testserver"},  # another scheme is another origin
        {"HTTP_ORIGIN": "http://testserver:8080"},
        {"HTTP_ORIGIN": "null"},
        {"HTTP_ORIGIN": "http://evil.example", "HTTP_SEC_FETCH_SITE": "same-origin"},
        {"HTTP_SEC_FETCH_SITE": "cross-site"},
        {"HTTP_SEC_FETCH_SITE": "same-site"},
        {},
    ],
    ids=[
        "foreign-origin",
        "other-scheme",
        "other-port",
        "null-origin",
        "foreign-origin-wins-over-fetch-metadata",
        "cross-site",
        "same-site-is-not-same-origin",
        "no-origin-at-all",
    ],
)
def test_it_refuses_json_from_anywhere_else(browser, session_id, headers):
    response = post(browser, messages(session_id), MESSAGE, **headers)
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]
    assert browser.get(messages(session_id)).json() == []


def test_it_refuses_a_form_body_without_an_origin(browser, session_id):
    response = post(
        browser,
        messages(session_id),
        "messages=hi",
        content_type="application/x-www-form-urlencoded",
        HTTP_SEC_FETCH_SITE="same-origin",
    )
    assert response.status_code == 403


@pytest.mark.parametrize("content_type", ["text/plain", "multipart/form-data; boundary=x"])
def test_it_refuses_simple_content_types_even_from_the_same_origin(
    browser, session_id, content_type
):
    response = post(
        browser, messages(session_id), json.dumps(MESSAGE), content_type, HTTP_ORIGIN=SITE
    )
    assert response.status_code == 403


def test_it_still_accepts_json_with_a_csrf_token_the_django_way(browser, session_id):
    browser.get("/accounts/login/")  # any page that sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    response = post(browser, messages(session_id), MESSAGE, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200


def test_it_leaves_token_clients_unchanged(owner_client, session_id):
    response = post(owner_client, messages(session_id), MESSAGE)
    assert response.status_code == 200
    foreign = post(owner_client, messages(session_id), MESSAGE, HTTP_ORIGIN="http://evil.example")
    assert foreign.status_code == 200  # a token is not ambient: no CSRF to fear


@pytest.fixture
def staff_browser(django_user_model) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user("barista", is_staff=True))
    return client


def test_staff_resolve_inbox_items_with_same_origin_json(staff_browser):
    post_item("inbox_same_origin")
    body = {"itemId": "inbox_same_origin", "response": "Back in stock"}

    refused = post(staff_browser, "/api/inbox/resolve", body, HTTP_ORIGIN="http://evil.example")
    accepted = post(staff_browser, "/api/inbox/resolve", body, HTTP_ORIGIN=SITE)

    assert refused.status_code == 403
    assert accepted.status_code == 200, accepted.json()
    assert accepted.json() == {"ok": True, "itemId": "inbox_same_origin"}
