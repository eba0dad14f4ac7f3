"""Notifications: email through a real SMTP server and signed webhooks, from an outbox."""

from __future__ import annotations

import hashlib
import hmac
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from gloveapp.approvals.models import ApprovalNotification
from gloveapp.approvals.notifications import notifications_deliver
from gloveapp.approvals.services import approvals_sweep
from tests.approvals.helpers import open_request
from tests.approvals.mailserver import HookReceiver, SmtpServer

ROOT = Path(__file__).resolve().parents[2]
SECRET = "a-long-random-approvals-webhook-secret"


@pytest.fixture
def smtp(settings):
    with SmtpServer() as server:
        settings.MAILERS = {
            "default": {
                "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                "OPTIONS": {"host": "127.0.0.1", "port": server.port, "timeout": 10},
            }
        }
        settings.GLOVE_PUBLIC_URL = "http://testserver"
        yield server


@pytest.fixture
def members(barista, manager):
    barista.email, manager.email = "bea@example.com", "max@example.com"
    barista.save()
    manager.save()
    return barista, manager


@pytest.mark.django_db
def test_assignment_emails_each_member_once_with_text_html_and_a_signed_link(
    smtp, session_id, members
):
    barista, _ = members
    row = open_request(session_id)
    assert notifications_deliver() == 1
    assert notifications_deliver() == 0
    [mail] = smtp.received
    assert mail.to == ["bea@example.com"]
    assert mail.subject == "Approval needed: place_order"
    text, html = mail.part("text/plain"), mail.part("text/html")
    assert '"quantity": 12' in text and "Yirgacheffe" in html
    link = next(
        word for word in text.split() if word.startswith("http://testserver/approvals/link/")
    )
    assert link in html

    as_barista = Client()
    as_barista.force_login(barista)
    opened = as_barista.get(link.removeprefix("http://testserver"))
    assert opened.status_code == 302 and f"request={row.pk}" in opened["Location"]
    page = as_barista.get(opened["Location"]).content.decode()
    assert 'name="via"' in page
    via = opened["Location"].split("via=")[1]
    as_barista.post(
        f"/approvals/{row.pk}/decide",
        {"decision": "reject", "fingerprint": row.fingerprint, "via": via},
    )
    assert row.decision_row.channel == "email"
    tampered = link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB")
    assert as_barista.get(tampered.removeprefix("http://testserver")).status_code == 404


@pytest.mark.django_db
def test_reminder_escalation_and_expiry_each_notify_their_people_once(smtp, session_id, members):
    t0 = timezone.now()
    row = open_request(session_id)
    row.remind_at, row.escalate_at, row.expires_at = t0, t0, t0 + timedelta(seconds=1)
    row.save()
    approvals_sweep(now=t0)
    approvals_sweep(now=t0)  # a second worker's sweep: nothing twice
    approvals_sweep(now=t0 + timedelta(seconds=2))
    while notifications_deliver(now=t0 + timedelta(seconds=3)):
        pass
    told = sorted((mail.to[0], mail.subject.split(":")[0]) for mail in smtp.received)
    assert told == [
        ("bea@example.com", "Approval needed"),
        ("bea@example.com", "Expired"),
        ("bea@example.com", "Reminder"),
        ("max@example.com", "Escalated to you"),
        ("max@example.com", "Expired"),
    ]


@pytest.mark.django_db
def test_a_groups_webhook_gets_signed_slack_json_and_is_retried_with_backoff(
    settings, session_id, members
):
    with HookReceiver(statuses=[500]) as hook:
        settings.GLOVE_APPROVAL_WEBHOOKS = {"baristas": hook.url}
        settings.GLOVE_APPROVAL_WEBHOOK_SECRET = SECRET
        settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
        open_request(session_id)
        t0 = timezone.now()
        assert notifications_deliver(now=t0) == 1  # the email; the webhook answered 500
        note = ApprovalNotification.objects.get(channel="webhook")
        assert (note.status, note.attempts) == ("pending", 1)
        assert note.next_attempt_at == t0 + timedelta(seconds=5)
        assert notifications_deliver(now=t0 + timedelta(seconds=4)) == 0
        assert notifications_deliver(now=t0 + timedelta(seconds=5)) == 1
        assert len(hook.posts) == 2
        headers, body = hook.posts[1]
        timestamp = headers["x-glove-timestamp"]
        expected = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
        assert headers["x-glove-signature"] == "sha256=" + expected.hexdigest()
        assert headers["idempotency-key"] == hook.posts[0][0]["idempotency-key"]
        payload = hook.bodies()[1]
        assert payload["text"].startswith("Approval needed: place_order")
        assert payload["blocks"][-1]["elements"][0]["url"].startswith(
            django_settings.GLOVE_PUBLIC_URL.rstrip("/") + "/approvals/link/"
        )
        assert payload["approval"]["event"] == "assigned"


@pytest.mark.process
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
def test_email_arrives_exactly_once_when_the_worker_is_killed_while_sending(
    requires_postgres, smtp, session_id, members
):
    database = django_settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{database['USER']}@{database['HOST'] or '127.0.0.1'}:"
            f"{database['PORT'] or 5432}/{database['NAME']}"
        ),
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp.port),
        "GLOVE_APPROVAL_SWEEP_SECONDS": "0.2",
        "GLOVE_APPROVAL_NOTIFY_LEASE_SECONDS": "1",
        "GLOVE_TASKS_BACKEND": "db",
        "REDIS_URL": "",
    }
    smtp.handler.hold = __import__("threading").Event()
    smtp.handler.hold.set()
    open_request(session_id)  # one email: bea, of the baristas

    def worker() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "manage.py", "turn_worker"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    first = worker()
    try:
        assert smtp.handler.holding.wait(timeout=120), "the worker never started sending"
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        smtp.handler.released.set()
        second = worker()
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if ApprovalNotification.objects.filter(status="sent").exists():
                    break
                time.sleep(0.1)
            time.sleep(1)  # a duplicate would have arrived by now
        finally:
            second.terminate()
            second.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    note = ApprovalNotification.objects.get()
    assert (note.status, note.attempts) == ("sent", 2)
    assert [mail.to for mail in smtp.received] == [["bea@example.com"]]
