"""`manage.py prune_live_events`: the event log is trimmed, recent events stay."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone

from gloveapp.live.eventlog import record_event
from gloveapp.live.models import LiveEvent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def event(age: timedelta) -> LiveEvent:
    with transaction.atomic():
        row = record_event(stream="session:prune", type="session.updated", payload={})
    LiveEvent.objects.filter(pk=row.pk).update(created_at=timezone.now() - age)
    return row


def test_it_deletes_events_older_than_the_given_days_and_keeps_the_rest():
    old = event(timedelta(days=10))
    recent = event(timedelta(days=2))
    out = StringIO()

    call_command("prune_live_events", "--days", "7", stdout=out)

    assert list(LiveEvent.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not LiveEvent.objects.filter(pk=old.pk).exists()
    assert "Deleted 1 live event(s) older than 7 day(s)." in out.getvalue()


def test_it_keeps_a_week_by_default():
    event(timedelta(days=8))
    kept = event(timedelta(days=6))

    call_command("prune_live_events", stdout=StringIO())

    assert list(LiveEvent.objects.values_list("pk", flat=True)) == [kept.pk]


def test_it_refuses_a_non_positive_number_of_days_and_deletes_nothing():
    event(timedelta(days=30))

    with pytest.raises(CommandError, match="--days must be a positive"):
        call_command("prune_live_events", "--days", "0")

    assert LiveEvent.objects.count() == 1


async def test_it_resumes_a_pruned_quiet_session_without_telling_the_page_to_reload(
    layer, chat, owner_cookie
):
    from asgiref.sync import sync_to_async

    from gloveapp.pages.context import chat_context
    from tests.live.conftest import acommit_event, open_socket

    await acommit_event(chat.id, title="old")
    await acommit_event("another-chat", title="recent")
    # A week later: this chat's events are gone, another chat's are not.
    await LiveEvent.objects.filter(stream=f"session:{chat.id}").adelete()

    context = await sync_to_async(chat_context)(chat, user=chat.owner)
    communicator = await open_socket(chat.id, owner_cookie, last_event_id=context["last_event_id"])

    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()
