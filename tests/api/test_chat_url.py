"""Signed chat URLs: `/api/chat` for clients that can send no cookie and no header."""

from __future__ import annotations

import time
from unittest import mock

import httpx
import pytest
from django.test import override_settings

from tests.api.test_chat import CHAT_BODY, sse_frames

pytestmark = [pytest.mark.postgres]


def mint(client, session_id):
    return client.post(f"/api/sessions/{session_id}/chat-url")


@pytest.mark.django_db
def test_it_mints_a_url_that_chats_with_no_credentials_at_all(
    owner_client, session_id, anon_client
):
    minted = mint(owner_client, session_id)
    assert minted.status_code == 200
    body = minted.json()
    assert body["path"].startswith("/api/chat/")
    assert body["url"] == f"http://testserver{body['path']}"
    assert body["expiresAt"].endswith("Z")

    response = anon_client.post(body["path"], CHAT_BODY, format="json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")


@pytest.mark.django_db
def test_it_mints_urls_only_for_the_callers_own_sessions(
    owner_client, other_client, anon_client, session_id
):
    assert mint(other_client, session_id).status_code == 404
    assert mint(owner_client, "glove_no_such_session").status_code == 404
    assert mint(anon_client, session_id).status_code == 401


@pytest.mark.django_db
def test_it_refuses_a_tampered_url(owner_client, anon_client, session_id):
    path = mint(owner_client, session_id).json()["path"]
    token = path.rsplit("/", 1)[1]
    payload, rest = token.split(":", 1)
    flipped = payload[:-1] + ("A" if payload[-1] != "A" else "B")
    for forged in (f"{flipped}:{rest}", token[:-1], "not-a-token"):
        response = anon_client.post(f"/api/chat/{forged}", CHAT_BODY, format="json")
        assert response.status_code == 401
        assert response.json() == {"error": "This chat URL is not valid."}


@pytest.mark.django_db
@override_settings(GLOVE_CHAT_URL_TTL_SECONDS=900)
def test_it_refuses_an_expired_url(owner_client, anon_client, session_id):
    minted_long_ago = time.time() - 901
    with mock.patch("django.core.signing.time.time", return_value=minted_long_ago):
        path = mint(owner_client, session_id).json()["path"]
    response = anon_client.post(path, CHAT_BODY, format="json")
    assert response.status_code == 401
    assert "expired" in response.json()["error"]


@pytest.mark.django_db
def test_it_refuses_a_url_whose_session_was_deleted(owner_client, anon_client, session_id):
    path = mint(owner_client, session_id).json()["path"]
    assert owner_client.delete(f"/api/sessions/{session_id}").status_code in (200, 204)
    assert anon_client.post(path, CHAT_BODY, format="json").status_code == 401


@pytest.mark.django_db
def test_it_answers_a_cors_preflight_for_the_signed_url(owner_client, anon_client, session_id):
    path = mint(owner_client, session_id).json()["path"]
    response = anon_client.options(
        path,
        HTTP_ORIGIN="https://shop.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type",
    )
    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "Content-Type" in response["Access-Control-Allow-Headers"]
    # The cookie-authenticated endpoint stays closed to other origins.
    assert "Access-Control-Allow-Origin" not in anon_client.options("/api/chat")


def test_a_signed_url_works_over_http_with_no_headers(live_server_process, live_token):
    session = httpx.post(
        f"{live_server_process.url}/api/sessions",
        json={"title": "signed"},
        headers={"Authorization": f"Token {live_token}"},
    ).json()["sessionId"]
    minted = httpx.post(
        f"{live_server_process.url}/api/sessions/{session}/chat-url",
        headers={"Authorization": f"Token {live_token}"},
    ).json()
    response = httpx.post(minted["url"], json=CHAT_BODY, timeout=30)
    assert response.status_code == 200
    assert sse_frames(response.text)[-1]["type"] == "done"
