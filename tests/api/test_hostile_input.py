"""Input built to break parsers gets a 4xx, never a 500, and writes nothing."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from gloveapp.conversations.models import Message
from inbox.models import InboxItem
from tests.helpers import post_item
from tests.inbox.test_resolve_api import SECRET, signed_post

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

DEEP = "[" * 100_000 + "]" * 100_000


def test_it_answers_json_nested_too_deeply_with_a_400(owner_client, session_id):
    answer = owner_client.post(
        f"/api/sessions/{session_id}/messages", data=DEEP, content_type="application/json"
    )

    assert answer.status_code == 400
    assert "nested too deeply" in answer.json()["error"]
    assert Message.objects.filter(session_id=session_id).count() == 0


def test_it_refuses_deep_json_at_the_resolve_endpoint_too(django_user_model):
    staff = django_user_model.objects.create_user("barista", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)

    answer = client.post("/api/inbox/resolve", data=DEEP, content_type="application/json")

    assert answer.status_code == 400


@pytest.mark.parametrize(
    ("header", "value", "named"),
    [
        *(
            ("HTTP_X_GLOVE_TIMESTAMP", stamp, "Unix time")
            for stamp in ["\u00b2", "1" * 400, "9" * 5000, "-5", " 12"]
        ),
        # Headers arrive as latin-1: a byte 0x80-0xFF is a non-ASCII character, which
        # hmac.compare_digest refuses with a TypeError (a 500) when compared as text.
        *(
            ("HTTP_X_GLOVE_SIGNATURE", signature, "X-Glove-Signature")
            for signature in ["sha256=\u00e9" + "0" * 63, "\u00ff", "sha256=caf\u00e9"]
        ),
    ],
)
def test_it_refuses_a_hostile_webhook_header_naming_it(settings, header, value, named):
    settings.GLOVE_WEBHOOK_SECRET = SECRET
    post_item("inbox_1_hostile")

    answer = signed_post({"itemId": "inbox_1_hostile", "response": "x"}, **{header: value})

    assert answer.status_code == 401
    assert named in answer.json()["error"]
    assert InboxItem.objects.get(pk="inbox_1_hostile").status == "pending"


def test_it_throttles_the_chat_proxy_per_user(owner_client, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"chat": "2/min"},
    }
    from rest_framework.settings import api_settings
    from rest_framework.throttling import ScopedRateThrottle

    # DRF caches its settings at import; point the throttle at the test's rates.
    ScopedRateThrottle.THROTTLE_RATES = {"chat": "2/min"}
    try:
        body = json.dumps({"systemPrompt": "", "messages": [{"sender": "user", "text": "hi"}]})
        codes = [
            owner_client.post("/api/chat", data=body, content_type="application/json").status_code
            for _ in range(3)
        ]
    finally:
        ScopedRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES

    assert codes[:2] == [200, 200]
    assert codes[2] == 429


TOO_LARGE = json.dumps({"messages": [{"sender": "user", "text": "x" * 3_000_000}]})


@pytest.mark.parametrize("route", ["/api/sessions/{id}/messages", "/api/chat", "/api/sessions"])
def test_it_answers_a_body_over_the_upload_limit_with_a_json_413(owner_client, session_id, route):
    answer = owner_client.post(
        route.format(id=session_id), data=TOO_LARGE, content_type="application/json"
    )

    assert answer.status_code == 413
    assert answer["Content-Type"] == "application/json"
    assert "larger than the 2,621,440 bytes allowed" in answer.json()["error"]
    assert Message.objects.filter(session_id=session_id).count() == 0


@pytest.mark.parametrize(
    ("route", "body", "lookup"),
    [
        # The hot append takes the id from memory and the append itself checks the row.
        ("messages", {"messages": [{"sender": "user", "text": "hi"}]}, "remembered"),
        ("messages", {"messages": [{"sender": "user", "text": "hi"}]}, "fresh"),
        ("tokens", {"tokens_in": 1, "tokens_out": 1}, "fresh"),
    ],
)
def test_a_session_deleted_during_a_write_is_a_404_and_nothing_is_written(
    owner_client, session_id, monkeypatch, route, body, lookup
):
    from gloveapp.conversations import access
    from gloveapp.conversations.models import Session
    from gloveapp.conversations.services import session_delete

    name = {"remembered": "remembered_owned_session_id", "fresh": "owned_or_unborn_session_id"}
    checked = getattr(access, name[lookup])

    def check_then_lose_the_race(user, key):
        global_id = checked(user, key)
        if global_id is not None and Session.objects.filter(pk=global_id).exists():
            # Another request deletes it now (its key is retired: never created again).
            session_delete(session=Session.objects.get(pk=global_id))
        return global_id

    monkeypatch.setattr(access, name[lookup], check_then_lose_the_race)
    if lookup == "fresh":  # nothing remembered: the write looks the key up
        access.forget_every_owned_session_id()
        monkeypatch.setattr(access, "remembered_owned_session_id", _not_remembered)
    answer = owner_client.post(f"/api/sessions/{session_id}/{route}", data=body, format="json")

    assert answer.status_code == 404
    assert answer.json() == {"error": "Session not found."}
    assert Message.objects.count() == 0
    assert not Session.objects.filter(key=session_id).exists()


def _not_remembered(user, key):
    from django.http import Http404

    raise Http404("Session not found.")
