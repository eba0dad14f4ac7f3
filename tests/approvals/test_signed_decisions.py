"""A signed decision is bound to one request and accepted once; what we sign and what we
accept use different secrets."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.approvals.notifications import notifications_deliver
from gloveapp.conversations.services import session_create
from inbox.models import UsedWebhookSignature
from inbox.webhooks import used_signatures_prune
from tests.approvals.helpers import open_request
from tests.approvals.mailserver import HookReceiver

pytestmark = pytest.mark.django_db

ACCEPT_SECRET = "the-secret-that-accepts-signed-decisions"
SEND_SECRET = "the-secret-that-signs-our-notifications"


@pytest.fixture
def accepting(settings):
    settings.GLOVE_WEBHOOK_SECRET = ACCEPT_SECRET
    settings.GLOVE_APPROVAL_WEBHOOK_SECRET = SEND_SECRET


@pytest.fixture
def alice_and_bob_requests(session_id, orders_agent, django_user_model):
    """Two customers placing the very same order: the same tool and arguments."""
    bob = django_user_model.objects.create_user("bob", password="pw-bob-1")
    bobs_session = session_create(owner=bob, agent_name="orders", title="Order").pk
    alices, bobs = open_request(session_id), open_request(bobs_session)
    assert alices.fingerprint == bobs.fingerprint  # identical orders, identical arguments
    return alices, bobs


def signed(body: dict, *, secret: str = ACCEPT_SECRET, timestamp: str | None = None):
    raw = json.dumps(body).encode()
    timestamp = timestamp or str(int(time.time()))
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + raw, hashlib.sha256)
    return raw, timestamp, "sha256=" + digest.hexdigest()


def post_signed(client, request_id, raw: bytes, timestamp: str, signature: str):
    return client.post(
        f"/api/approvals/{request_id}/decide",
        data=raw,
        content_type="application/json",
        HTTP_X_GLOVE_TIMESTAMP=timestamp,
        HTTP_X_GLOVE_SIGNATURE=signature,
    )


def status_of(row: ApprovalRequest) -> str:
    row.refresh_from_db()
    return row.status


@pytest.mark.parametrize("kind", ["approve", "reject"])
def test_it_refuses_alices_signed_decision_replayed_onto_bobs_identical_request(
    accepting, client, alice_and_bob_requests, kind
):
    alices, bobs = alice_and_bob_requests
    decision = {"decision": kind, "fingerprint": alices.fingerprint, "requestId": str(alices.pk)}
    raw, timestamp, signature = signed(decision)

    onto_bob = post_signed(client, bobs.pk, raw, timestamp, signature)

    assert onto_bob.status_code == 400
    assert onto_bob.json()["field"] == "requestId"
    assert status_of(bobs) == "open"


@pytest.mark.parametrize("kind", ["approve", "reject"])
def test_it_refuses_a_signed_decision_that_names_no_request(
    accepting, client, alice_and_bob_requests, kind
):
    alices, bobs = alice_and_bob_requests
    raw, timestamp, signature = signed({"decision": kind, "fingerprint": alices.fingerprint})

    for row in (alices, bobs):
        response = post_signed(client, row.pk, raw, timestamp, signature)
        assert response.status_code in (400, 401, 403)
        assert status_of(row) == "open"


@pytest.mark.parametrize("kind", ["approve", "reject"])
def test_it_accepts_a_signature_once_even_inside_its_window(
    accepting, client, alice_and_bob_requests, kind
):
    alices, bobs = alice_and_bob_requests
    decision = {"decision": kind, "fingerprint": alices.fingerprint, "requestId": str(alices.pk)}
    raw, timestamp, signature = signed(decision)

    first = post_signed(client, alices.pk, raw, timestamp, signature)
    assert first.status_code == 200, first.json()
    assert first.json()["decision"]["decision"] == kind

    again = post_signed(client, alices.pk, raw, timestamp, signature)
    elsewhere = post_signed(client, bobs.pk, raw, timestamp, signature)
    assert again.status_code in (401, 403)
    assert "already used" in again.json()["error"]
    assert elsewhere.status_code in (401, 403)
    assert status_of(bobs) == "open"


def test_bobs_own_signed_decision_decides_bobs_request(accepting, client, alice_and_bob_requests):
    alices, bobs = alice_and_bob_requests
    raw, timestamp, signature = signed(
        {"decision": "approve", "fingerprint": bobs.fingerprint, "requestId": str(bobs.pk)}
    )

    response = post_signed(client, bobs.pk, raw, timestamp, signature)

    assert response.status_code == 200, response.json()
    assert (status_of(bobs), status_of(alices)) == ("decided", "open")


def test_a_signature_made_with_our_sending_secret_is_refused(
    accepting, client, alice_and_bob_requests
):
    alices, _ = alice_and_bob_requests
    raw, timestamp, signature = signed(
        {"decision": "approve", "fingerprint": alices.fingerprint, "requestId": str(alices.pk)},
        secret=SEND_SECRET,
    )

    assert post_signed(client, alices.pk, raw, timestamp, signature).status_code in (401, 403)
    assert status_of(alices) == "open"


def test_used_signatures_are_forgotten_after_twice_the_window(
    accepting, client, alice_and_bob_requests, settings
):
    from datetime import timedelta

    from django.utils import timezone

    alices, _ = alice_and_bob_requests
    raw, timestamp, signature = signed(
        {"decision": "approve", "fingerprint": alices.fingerprint, "requestId": str(alices.pk)}
    )
    assert post_signed(client, alices.pk, raw, timestamp, signature).status_code == 200
    window = timedelta(seconds=settings.GLOVE_WEBHOOK_MAX_SKEW_SECONDS)

    assert used_signatures_prune(now=timezone.now() + window) == 0
    assert used_signatures_prune(now=timezone.now() + 2 * window + timedelta(seconds=1)) == 1
    assert not UsedWebhookSignature.objects.exists()


def test_the_system_check_refuses_one_secret_for_signing_and_accepting(settings):
    settings.GLOVE_WEBHOOK_SECRET = settings.GLOVE_APPROVAL_WEBHOOK_SECRET = ACCEPT_SECRET

    with pytest.raises(SystemCheckError, match=r"glove\.E020"):
        call_command("check")


def test_outgoing_webhooks_are_never_signed_with_the_accepting_secret(
    settings, session_id, members_with_hook
):
    settings.GLOVE_WEBHOOK_SECRET = ACCEPT_SECRET
    settings.GLOVE_APPROVAL_WEBHOOK_SECRET = ""
    open_request(session_id)

    notifications_deliver()

    assert members_with_hook.posts == []  # not sent: no secret of its own


@pytest.fixture
def members_with_hook(settings, barista):
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    with HookReceiver(statuses=[]) as hook:
        settings.GLOVE_APPROVAL_WEBHOOKS = {"baristas": hook.url}
        yield hook
