"""`POST /api/inbox/resolve`: staff (token or session) or a signed webhook resolve an item."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from inbox.models import InboxItem
from inbox.services import inbox_item_resolve
from inbox.webhooks import FUTURE_MARGIN_SECONDS, sign
from tests.helpers import post_item, snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

URL = "/api/inbox/resolve"
SECRET = "a-long-random-webhook-secret-for-tests"


@pytest.fixture
def staff_client() -> APIClient:
    staff = get_user_model().objects.create_user("barista", is_staff=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    client.user = staff
    return client


@pytest.fixture
def customer_client() -> APIClient:
    customer = get_user_model().objects.create_user("customer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=customer).key}")
    return client


@pytest.fixture
def webhook_secret(settings) -> str:
    settings.GLOVE_WEBHOOK_SECRET = SECRET
    settings.GLOVE_WEBHOOK_MAX_SKEW_SECONDS = 300
    return SECRET


def signed_post(
    body: dict | bytes,
    *,
    secret: str = SECRET,
    timestamp: int | None = None,
    skew: int = 0,
    **headers,
):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    stamp = str((int(time.time()) + skew) if timestamp is None else timestamp)
    defaults = {
        "HTTP_X_GLOVE_TIMESTAMP": stamp,
        "HTTP_X_GLOVE_SIGNATURE": sign(secret, stamp, raw),
    }
    defaults.update(headers)
    return APIClient().post(URL, data=raw, content_type="application/json", **defaults)


# -- staff --------------------------------------------------------------------------------


def test_it_lets_staff_resolve_with_a_token(staff_client):
    post_item("inbox_1_a")

    answer = staff_client.post(
        URL, {"itemId": "inbox_1_a", "response": "Back in stock"}, format="json"
    )

    assert answer.status_code == 200
    assert answer.json() == {"ok": True, "itemId": "inbox_1_a"}
    item = InboxItem.objects.get(pk="inbox_1_a")
    assert (item.status, item.response, item.resolved_by) == ("resolved", "Back in stock", "api")
    assert item.resolved_by_user == staff_client.user


def test_it_lets_staff_resolve_with_their_session():
    staff = get_user_model().objects.create_user("barista", is_staff=True)
    client = APIClient()
    client.force_login(staff)
    post_item("inbox_1_a")

    answer = client.post(URL, {"itemId": "inbox_1_a", "response": "Back in stock"}, format="json")

    assert answer.status_code == 200
    assert InboxItem.objects.get(pk="inbox_1_a").resolved_by_user == staff


def test_it_refuses_a_customer(customer_client):
    post_item("inbox_1_a")
    before = snapshot()

    answer = customer_client.post(URL, {"itemId": "inbox_1_a", "response": "x"}, format="json")

    assert answer.status_code == 403
    assert "staff" in answer.json()["error"]
    assert snapshot() == before


def test_it_refuses_an_anonymous_caller():
    post_item("inbox_1_a")
    before = snapshot()

    answer = APIClient().post(URL, {"itemId": "inbox_1_a", "response": "x"}, format="json")

    assert answer.status_code == 401
    assert snapshot() == before


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"itemId": "inbox_1_a"},
        {"response": "x"},
        {"itemId": "", "response": "x"},
        {"itemId": "inbox_1_a", "response": ""},
    ],
)
def test_it_requires_both_fields(staff_client, body):
    post_item("inbox_1_a")
    before = snapshot()

    answer = staff_client.post(URL, body, format="json")

    assert answer.status_code == 400
    assert answer.json() == {"error": "itemId and response are required"}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"itemId": "inbox_1_a", "response": 42}, "response must be a string"),
        ({"itemId": ["inbox_1_a"], "response": "x"}, "itemId must be a string"),
        ({"itemId": "inbox_1_a", "response": "  "}, "response must not be empty"),
        ({"itemId": "inbox_1_a", "response": "nul\x00"}, "null characters"),
        ({"itemId": "x" * 200, "response": "x"}, "itemId"),
    ],
)
def test_it_explains_bad_input_and_changes_nothing(staff_client, body, complaint):
    post_item("inbox_1_a")
    before = snapshot()

    answer = staff_client.post(URL, body, format="json")

    assert answer.status_code == 400
    assert complaint.lower() in answer.json()["error"].lower()
    assert snapshot() == before


def test_it_refuses_a_body_that_is_not_an_object(staff_client):
    answer = staff_client.post(URL, data="[1, 2]", content_type="application/json")
    assert answer.status_code == 400
    answer = staff_client.post(URL, data="{not json", content_type="application/json")
    assert answer.status_code == 400


def test_it_answers_404_for_an_unknown_item(staff_client):
    answer = staff_client.post(URL, {"itemId": "inbox_nope", "response": "x"}, format="json")

    assert answer.status_code == 404
    assert answer.json()["error"] == 'No inbox item with id "inbox_nope".'


def test_it_answers_409_for_an_item_already_resolved(staff_client):
    post_item("inbox_1_a")
    inbox_item_resolve(item_id="inbox_1_a", response="first")

    answer = staff_client.post(URL, {"itemId": "inbox_1_a", "response": "second"}, format="json")

    assert answer.status_code == 409
    assert "already resolved" in answer.json()["error"]
    assert answer.json()["status"] == "resolved"
    assert InboxItem.objects.get(pk="inbox_1_a").response == "first"


# -- signed webhooks ----------------------------------------------------------------------


def test_it_accepts_a_signed_webhook(webhook_secret):
    post_item("inbox_1_a")

    answer = signed_post({"itemId": "inbox_1_a", "response": "Back in stock"})

    assert answer.status_code == 200, answer.content
    assert answer.json() == {"ok": True, "itemId": "inbox_1_a"}
    item = InboxItem.objects.get(pk="inbox_1_a")
    assert (item.resolved_by, item.resolved_by_user) == ("webhook", None)


def test_it_accepts_a_signed_request_once_even_inside_its_window(webhook_secret):
    post_item("inbox_1_a")
    post_item("inbox_1_b")
    stamp = int(time.time())
    first = signed_post({"itemId": "inbox_1_b", "response": "yes"}, timestamp=stamp)
    assert first.status_code == 200, first.content

    replayed = signed_post({"itemId": "inbox_1_b", "response": "yes"}, timestamp=stamp)

    assert replayed.status_code == 401
    assert "already used" in replayed.json()["error"]


def test_it_answers_a_signed_webhook_with_the_same_404_and_409(webhook_secret):
    post_item("inbox_1_a")
    inbox_item_resolve(item_id="inbox_1_a", response="first")

    assert signed_post({"itemId": "inbox_nope", "response": "x"}).status_code == 404
    assert signed_post({"itemId": "inbox_1_a", "response": "x"}).status_code == 409


@pytest.mark.parametrize(
    ("tamper", "complaint"),
    [
        ({"secret": "a-different-secret-of-enough-length"}, "does not match"),
        ({"HTTP_X_GLOVE_SIGNATURE": "sha256=" + "0" * 64}, "does not match"),
        ({"HTTP_X_GLOVE_SIGNATURE": "deadbeef"}, "does not match"),
        ({"skew": -400}, "possible replay"),
        ({"skew": +400}, "possible replay"),
        ({"HTTP_X_GLOVE_TIMESTAMP": "yesterday"}, "Unix time"),
    ],
)
def test_it_refuses_a_bad_signature_and_changes_nothing(webhook_secret, tamper, complaint):
    post_item("inbox_1_a")
    before = snapshot()

    answer = signed_post({"itemId": "inbox_1_a", "response": "x"}, **tamper)

    assert answer.status_code == 401
    assert complaint in answer.json()["error"]
    assert snapshot() == before


def test_it_refuses_a_signed_body_that_was_altered(webhook_secret):
    post_item("inbox_1_a")
    stamp = str(int(time.time()))
    signed = json.dumps({"itemId": "inbox_1_a", "response": "ok"}).encode()
    altered = json.dumps({"itemId": "inbox_1_a", "response": "pwned"}).encode()

    answer = APIClient().post(
        URL,
        data=altered,
        content_type="application/json",
        HTTP_X_GLOVE_TIMESTAMP=stamp,
        HTTP_X_GLOVE_SIGNATURE=sign(SECRET, stamp, signed),
    )

    assert answer.status_code == 401
    assert InboxItem.objects.get(pk="inbox_1_a").status == "pending"


def test_it_refuses_a_request_replayed_after_the_window(webhook_secret):
    post_item("inbox_1_a")
    # Captured six minutes ago, signature intact: still refused.
    answer = signed_post({"itemId": "inbox_1_a", "response": "x"}, timestamp=int(time.time()) - 360)

    assert answer.status_code == 401
    assert InboxItem.objects.get(pk="inbox_1_a").status == "pending"


def test_it_refuses_signed_webhooks_when_no_secret_is_configured(settings):
    settings.GLOVE_WEBHOOK_SECRET = ""
    post_item("inbox_1_a")

    answer = signed_post({"itemId": "inbox_1_a", "response": "x"})

    assert answer.status_code == 401
    assert "not configured" in answer.json()["error"]
    assert InboxItem.objects.get(pk="inbox_1_a").status == "pending"


def test_it_refuses_a_timestamp_more_than_its_margin_ahead(webhook_secret):
    """Ahead by a minute (inside the 300 s window): refused, so the used-signature record,
    kept twice the window from its use, always outlives the signature."""
    post_item("inbox_1_a")

    ahead = signed_post({"itemId": "inbox_1_a", "response": "x"}, skew=FUTURE_MARGIN_SECONDS + 30)
    near = signed_post({"itemId": "inbox_1_a", "response": "x"}, skew=FUTURE_MARGIN_SECONDS - 10)

    assert ahead.status_code == 401
    assert "ahead" in ahead.json()["error"]
    assert near.status_code == 200, near.content


def test_it_refuses_a_signed_body_that_repeats_a_key(webhook_secret):
    post_item("inbox_1_a")
    post_item("inbox_1_b")
    before = snapshot()
    raw = b'{"itemId": "inbox_1_a", "response": "x", "itemId": "inbox_1_b"}'

    answer = signed_post(raw)

    assert answer.status_code == 400
    assert answer.json()["field"] == "itemId"
    assert snapshot() == before
