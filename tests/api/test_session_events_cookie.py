"""The event stream's Django view with a signed-in browser's cookie (no token) answers
without a 5xx: the session's user is read in the request's thread, not the event loop.
(Found by bench/hostile_sweep.py on make serve-prod's granian: a 500.)"""

from __future__ import annotations

import pytest
from django.test import Client

from gloveapp.conversations.services import session_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_signed_in_browser_asking_for_the_stream_over_wsgi_gets_no_5xx(django_user_model):
    owner = django_user_model.objects.create_user("streamer", password="pw-streamer-1")
    session = session_create(owner=owner, agent_name="coffee", title="Brew")
    client = Client()
    client.force_login(owner)

    for query in ("", "?last_event_id=abc", "?limit=-1&after=%00"):
        answer = client.get(f"/api/sessions/{session.key}/events{query}")
        assert answer.status_code < 500, answer.content[:300]
