"""A turn's completion webhook: asked for at the start, signed, retried, once per end; a
replayed delivery is refused by the receiver's check."""

from __future__ import annotations

import io
from datetime import timedelta

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.utils import timezone

from gloveapp.turns.models import Turn, TurnPush, TurnWebhook
from gloveapp.turns.submit import turn_withdraw
from gloveapp.turns.task_pushes import input_required_event, task_push_due, turn_pushes_deliver
from gloveapp.turns.webhooks import turn_webhook_ask, turn_webhook_due, turn_webhooks_deliver
from tests.webhook_receiver import Receiver

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SECRET = "turn-webhook-test-secret"


@pytest.fixture
def receiver(settings):
    settings.GLOVE_TURN_WEBHOOK_SECRET = SECRET
    receiver = Receiver(SECRET)
    yield receiver
    receiver.close()


def _start(client, session_id: str, webhook: str):
    response = client.post(
        f"/api/sessions/{session_id}/agent/turns",
        {"text": "Do you have Kenya AA?", "webhook": webhook},
        format="json",
    )
    assert response.status_code == 202, response.json()
    return response.json()["turnId"]


def test_a_turns_end_is_told_once_signed_naming_the_turn_and_its_outcome(
    owner_client, session_id, receiver
):
    turn_id = _start(owner_client, session_id, receiver.url)
    assert turn_webhooks_deliver() == 0  # the turn has not ended: nothing is due
    turn = Turn.objects.get(pk=turn_id)
    assert turn_withdraw(session_id=turn.session_id, turn_id=turn_id)
    assert turn_webhooks_deliver() == 1
    assert turn_webhooks_deliver() == 0
    [body] = receiver.deliveries
    assert body["event"] == "turn.ended" and body["turnId"] == turn_id
    assert body["sessionId"] == session_id and body["outcome"] == "cancelled"
    assert body["deliveryId"] == f"turn-{turn_id}-ended"
    headers, raw = receiver.requests[-1]
    assert headers["X-Glove-Event"] == "turn.ended"
    assert headers["Idempotency-Key"] == body["deliveryId"]
    # The same request again (captured and replayed): the receiver's check refuses it.
    replayed = httpx.post(receiver.url, content=raw, headers=headers)
    assert replayed.status_code == 409 and receiver.refused == ["replayed"]
    # Re-dated, it no longer matches its signature.
    redated = {**headers, "X-Glove-Timestamp": str(int(headers["X-Glove-Timestamp"]) + 1)}
    assert httpx.post(receiver.url, content=raw, headers=redated).status_code == 401
    assert receiver.counted() == {body["deliveryId"]: 1}


def test_a_receiver_that_fails_gets_it_again_later_with_backoff(owner_client, session_id, receiver):
    receiver.failures = 2
    turn_id = _start(owner_client, session_id, receiver.url)
    turn = Turn.objects.get(pk=turn_id)
    turn_withdraw(session_id=turn.session_id, turn_id=turn_id)
    assert turn_webhooks_deliver() == 0
    row = TurnWebhook.objects.get(pk=turn_id)
    assert row.status == "pending" and row.attempts == 1 and "500" in row.last_error
    first_wait = row.next_attempt_at - timezone.now()
    assert turn_webhooks_deliver() == 0  # not due again yet
    later = timezone.now() + timedelta(seconds=6)
    assert turn_webhooks_deliver(now=later) == 0
    second_wait = TurnWebhook.objects.get(pk=turn_id).next_attempt_at - later
    assert second_wait > first_wait  # the backoff doubles
    assert turn_webhooks_deliver(now=later + timedelta(seconds=11)) == 1
    assert TurnWebhook.objects.get(pk=turn_id).status == "sent"
    assert receiver.counted() == {f"turn-{turn_id}-ended": 1}


def test_no_key_no_webhook_and_none_signed_with_the_key_we_accept(
    owner_client, session_id, receiver, settings
):
    turn_id = _start(owner_client, session_id, receiver.url)
    turn = Turn.objects.get(pk=turn_id)
    turn_withdraw(session_id=turn.session_id, turn_id=turn_id)
    settings.GLOVE_TURN_WEBHOOK_SECRET = ""
    assert turn_webhooks_deliver() == 0
    settings.GLOVE_TURN_WEBHOOK_SECRET = settings.GLOVE_WEBHOOK_SECRET = "same"
    assert turn_webhooks_deliver() == 0
    assert TurnWebhook.objects.get(pk=turn_id).status == "pending"
    assert receiver.requests == []
    # ... and the system check says so before anything is sent.
    with pytest.raises(SystemCheckError, match=r"glove\.E022"):
        call_command("check")


def test_a_tokens_webhook_is_every_turns_default_and_a_start_may_name_its_own(
    owner, owner_client, session_id, receiver
):
    call_command("create_api_token", "owner", "--webhook", receiver.url, stdout=io.StringIO())
    by_default = owner_client.post(
        f"/api/sessions/{session_id}/agent/turns", {"text": "hello"}, format="json"
    ).json()["turnId"]
    own = _start(owner_client, session_id, "https://elsewhere.example/hook")
    assert TurnWebhook.objects.get(pk=by_default).url == receiver.url
    assert TurnWebhook.objects.get(pk=own).url == "https://elsewhere.example/hook"
    call_command("create_api_token", "owner", "--webhook", "", stdout=io.StringIO())
    without = owner_client.post(
        f"/api/sessions/{session_id}/agent/turns", {"text": "again"}, format="json"
    ).json()["turnId"]
    assert not TurnWebhook.objects.filter(pk=without).exists()
    with pytest.raises(CommandError):
        call_command("create_api_token", "owner", "--webhook", "ftp://x", stdout=io.StringIO())


def _a2a_turn(client, session_id: str, receiver) -> Turn:
    """A queued turn whose A2A task has a push config (as `CreateTaskPushNotificationConfig`
    makes it)."""
    response = client.post(
        f"/api/sessions/{session_id}/agent/turns", {"text": "checkout"}, format="json"
    )
    assert response.status_code == 202, response.json()
    turn = Turn.objects.get(pk=response.json()["turnId"])
    turn_webhook_ask(
        turn=turn, url=receiver.url, kind=TurnWebhook.Kind.A2A, config_id="c1", token="tok"
    )
    return turn


def test_an_a2a_task_is_pushed_once_per_change_whoever_reports_it_twice(
    owner_client, session_id, receiver
):
    turn = _a2a_turn(owner_client, session_id, receiver)
    asks = input_required_event(f"t{turn.pk}-s1")
    # A continuing attempt pushes the same prompt again: still one change.
    assert task_push_due(turn_id=turn.pk, event=asks, state="TASK_STATE_INPUT_REQUIRED")
    assert not task_push_due(turn_id=turn.pk, event=asks, state="TASK_STATE_INPUT_REQUIRED")
    assert turn_withdraw(session_id=turn.session_id, turn_id=turn.pk)
    assert not turn_webhook_due(turn_id=turn.pk, outcome=Turn.Status.CANCELLED)  # a 2nd ender
    assert turn_webhooks_deliver() == 0  # the config itself is never sent
    assert turn_pushes_deliver() == 2
    assert turn_pushes_deliver() == 0
    [asked] = [body for body in receiver.deliveries if "slotId" in body["task"]["metadata"]]
    [ended] = [body for body in receiver.deliveries if body is not asked]
    assert asked["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert asked["task"]["metadata"]["slotId"] == f"t{turn.pk}-s1"
    assert ended["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert receiver.counted() == {
        f"turn-{turn.pk}-input-required-t{turn.pk}-s1": 1,
        f"turn-{turn.pk}-ended": 1,
    }
    assert TurnPush.objects.filter(turn=turn).count() == 2


def test_a_push_refused_is_sent_again_later_and_one_whose_config_went_is_dropped(
    owner_client, session_id, receiver
):
    receiver.failures = 1
    turn = _a2a_turn(owner_client, session_id, receiver)
    assert turn_withdraw(session_id=turn.session_id, turn_id=turn.pk)
    assert turn_pushes_deliver() == 0
    push = TurnPush.objects.get(turn=turn)
    assert push.status == TurnPush.Status.PENDING and push.attempts == 1
    assert turn_pushes_deliver(now=timezone.now() + timedelta(minutes=5)) == 1
    assert receiver.counted() == {f"turn-{turn.pk}-ended": 1}
    assert len(receiver.requests) == 2

    other = _a2a_turn(owner_client, session_id, receiver)
    assert task_push_due(
        turn_id=other.pk, event=input_required_event("t-x"), state="TASK_STATE_INPUT_REQUIRED"
    )
    TurnWebhook.objects.filter(turn=other).delete()  # DeleteTaskPushNotificationConfig
    assert turn_pushes_deliver() == 1  # taken off the outbox, not sent
    assert len(receiver.requests) == 2
    # A task without a config has nothing to push.
    assert not task_push_due(turn_id=other.pk, event="ended", state="TASK_STATE_CANCELED")
