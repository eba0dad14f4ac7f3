"""The hot POST remembers which session an owner's key names (issue 13): one query less per
append. What it remembers can go stale only when that session is deleted; then the append
itself refuses (it checks the row is still the owner's session of that key), the request
is answered as if nothing had been remembered, and nothing lands anywhere else."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gloveapp.conversations.models import Message, RetiredSessionKey, Session
from gloveapp.live.models import LiveEvent
from tests.api.test_hot_routes import _client

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

POST = {"messages": [{"sender": "user", "text": "A flat white, please."}]}


def _post(client, key: str) -> int:
    return client.post(f"/api/sessions/{key}/messages", POST, format="json").status_code


def test_it_appends_through_the_remembered_id(owner):
    client = _client(owner)
    client.post("/api/sessions", {"sessionId": "kept"}, format="json")
    assert _post(client, "kept") == 200

    with CaptureQueriesContext(connection) as queries:
        assert _post(client, "kept") == 200

    # No lookup of the key: the append's own statement checks owner and key.
    assert not [q for q in queries if q["sql"].lstrip().upper().startswith("SELECT")], queries

    assert Message.objects.filter(session__owner=owner, session__key="kept").count() == 2


def test_a_deleted_session_is_a_404_and_nothing_is_written(owner):
    client = _client(owner)
    client.post("/api/sessions", {"sessionId": "gone"}, format="json")
    assert _post(client, "gone") == 200
    assert client.delete("/api/sessions/gone").status_code == 204

    assert _post(client, "gone") == 404
    assert not Message.objects.filter(session_id="gone").exists()


def test_a_key_created_again_after_its_session_was_deleted_gets_the_post(owner):
    # A deleted session's key with no retired row (removed here) may be created again,
    # under a fresh global id: what the process remembered names the old one.
    client = _client(owner)
    client.post("/api/sessions", {"sessionId": "again"}, format="json")
    assert _post(client, "again") == 200
    assert client.delete("/api/sessions/again").status_code == 204
    RetiredSessionKey.objects.filter(owner=owner, key="again").delete()
    assert client.post("/api/sessions", {"sessionId": "again"}, format="json").status_code == 201

    assert _post(client, "again") == 200

    session = Session.objects.get(owner=owner, key="again")
    assert session.id != "again"
    assert Message.objects.filter(session=session).count() == 1


def test_a_remembered_id_never_writes_into_another_owners_session(owner, django_user_model):
    # A global id can name a new session once the old one's events are pruned: here another
    # user's. The owner's process still remembers it for their deleted session's key.
    client = _client(owner)
    client.post("/api/sessions", {"sessionId": "shared"}, format="json")
    assert _post(client, "shared") == 200
    assert client.delete("/api/sessions/shared").status_code == 204
    LiveEvent.objects.update(created_at=timezone.now() - timedelta(days=30))
    call_command("prune_live_events", days=7, stdout=open("/dev/null", "w"))
    rival = _client(django_user_model.objects.create_user("rival"))
    assert rival.post("/api/sessions", {"sessionId": "shared"}, format="json").status_code == 201
    assert Session.objects.get(key="shared").id == "shared"  # the rival holds the old id

    assert _post(client, "shared") == 404

    assert not Message.objects.filter(session_id="shared").exists()
