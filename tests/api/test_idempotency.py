"""`Idempotency-Key`: a retried write stores nothing new and gets the first answer back.

The REST store's append, `POST /api/chat` and the chat page's post, each sent twice, and
sent by many clients at once with one key (a client retrying while its first try is still
in flight).
"""

from __future__ import annotations

import json

import pytest
from django.db import connections
from django.test import Client
from rest_framework.authtoken.models import Token

from gloveapp.api.common.access import ChatRateThrottle
from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.services import session_create
from gloveapp.core import Message as CoreMessage
from gloveapp.turns.models import Turn
from tests.api.test_chat import CHAT_BODY, scripted_chat_model, sse_frames  # noqa: F401
from tests.helpers import run_in_threads

pytestmark = [pytest.mark.postgres]

KEY = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
APPEND = {"messages": [{"sender": "user", "text": "A flat white, please"}]}


def _append(client, key: str | None = KEY, body: dict = APPEND, session: str = "glove_owner_1"):
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post(f"/api/sessions/{session}/messages", body, format="json", headers=headers)


def _stored(session_key: str = "glove_owner_1") -> list[str]:
    return list(
        Message.objects.filter(session__key=session_key)
        .order_by("seq")
        .values_list("text", flat=True)
    )


@pytest.mark.django_db
def test_it_stores_a_retried_append_once_and_answers_it_again(owner_client, session_id):
    first = _append(owner_client)
    retry = _append(owner_client)

    assert first.status_code == retry.status_code == 200
    assert first.json() == retry.json() == {"ok": True}
    assert "Idempotent-Replayed" not in first.headers
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert _stored() == ["A flat white, please"]
    # Without a key every post is its own append.
    _append(owner_client, key=None)
    assert _stored() == ["A flat white, please"] * 2


@pytest.mark.django_db
def test_it_refuses_a_key_reused_for_another_request(owner_client, session_id):
    owner_client.post("/api/sessions", {"sessionId": "glove_owner_2"}, format="json")
    _append(owner_client)
    other = _append(owner_client, body={"messages": [{"sender": "user", "text": "A mocha"}]})
    elsewhere = _append(owner_client, session="glove_owner_2")

    assert other.status_code == elsewhere.status_code == 422
    assert "different request" in other.json()["error"]
    assert _stored() == ["A flat white, please"]
    assert _stored("glove_owner_2") == []


@pytest.mark.django_db
def test_it_keeps_each_users_keys_apart(owner_client, other_client, session_id):
    _append(owner_client)
    other_client.post("/api/sessions", {"sessionId": "theirs"}, format="json")
    theirs = other_client.post(
        "/api/sessions/theirs/messages", APPEND, format="json", headers={"Idempotency-Key": KEY}
    )

    assert theirs.status_code == 200 and "Idempotent-Replayed" not in theirs.headers
    assert _stored("theirs") == ["A flat white, please"]


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "x" * 201, "caf\u00e9", "tab\tkey"])
def test_it_refuses_a_malformed_key_and_stores_nothing(owner_client, session_id, key):
    response = _append(owner_client, key=key)

    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]
    assert _stored() == []


@pytest.mark.django_db(transaction=True)
def test_it_stores_one_copy_of_concurrent_duplicates(owner, django_user_model):
    token, _ = Token.objects.get_or_create(user=owner)
    session_create(owner=owner, agent_name="coffee", session_id="dupes")

    def post(index: int) -> int:
        client = Client(headers={"Authorization": f"Token {token.key}"})
        response = client.post(
            "/api/sessions/dupes/messages",
            json.dumps(APPEND),
            content_type="application/json",
            headers={"Idempotency-Key": KEY},
        )
        connections.close_all()
        return response.status_code

    statuses = run_in_threads(12, post)

    assert statuses == [200] * 12
    assert _stored("dupes") == ["A flat white, please"]


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
def test_it_answers_a_retried_chat_from_the_first_answer_without_the_model(
    owner_client,
    scripted_chat_model,  # noqa: F811
    monkeypatch,
):
    # Three calls here; another test may have left a tighter chat rate in DRF's class.
    monkeypatch.setattr(ChatRateThrottle, "get_rate", lambda self: "1000/min")
    script, built = scripted_chat_model
    script.append(CoreMessage(sender="agent", text="One flat white."))
    headers = {"Idempotency-Key": KEY}

    first = owner_client.post("/api/chat", CHAT_BODY, format="json", headers=headers)
    first_body = b"".join(first).decode()
    retry = owner_client.post("/api/chat", CHAT_BODY, format="json", headers=headers)
    retry_body = b"".join(retry).decode()

    assert first.status_code == retry.status_code == 200
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry_body == first_body
    assert sse_frames(retry_body)[-1]["message"]["text"] == "One flat white."
    assert len(built) == 1  # the retry asked no model
    changed = owner_client.post(
        "/api/chat", {**CHAT_BODY, "systemPrompt": "Other"}, format="json", headers=headers
    )
    assert changed.status_code == 422


@pytest.mark.django_db(transaction=True)
def test_the_chat_page_stores_a_resent_message_once(django_user_model):
    customer = django_user_model.objects.create_user("carla")
    session = session_create(owner=customer, agent_name="coffee", title="Brew")
    client = Client()
    client.force_login(customer)
    form = {"text": "A cortado", "idempotency_key": KEY}

    first = client.post(f"/sessions/{session.key}/messages", form)
    resent = client.post(f"/sessions/{session.key}/messages", form)
    other = client.post(f"/sessions/{session.key}/messages", {**form, "text": "A mocha"})

    assert first.status_code == resent.status_code == 303
    assert other.status_code == 400
    assert list(Turn.objects.filter(session=session).values_list("text", flat=True)) == [
        "A cortado"
    ]
    assert Session.objects.filter(pk=session.pk).exists()


@pytest.mark.django_db
def test_pruned_keys_are_forgotten(owner_client, session_id):
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from gloveapp.conversations.models import IdempotentRequest

    _append(owner_client)
    IdempotentRequest.objects.update(created_at=timezone.now() - timedelta(days=3))

    call_command("prune_idempotency_keys", "--days", "2")
    again = _append(owner_client)

    assert "Idempotent-Replayed" not in again.headers
    assert _stored() == ["A flat white, please"] * 2


@pytest.mark.django_db(transaction=True)
def test_two_writers_of_one_key_on_either_side_of_midnight_store_one_answer(
    requires_postgres, owner
):
    """On PostgreSQL the keys are partitioned by day and the unique index covers one day: a
    first request's row of 23:59:59 sits in yesterday's partition, where today's insert
    would not collide with it. The second writer waits on the key's lock until the first
    commits, then replays its answer instead of running again."""
    import threading
    from datetime import timedelta

    from django.db import connection, transaction
    from django.utils import timezone

    from gloveapp.conversations.idempotency import idempotent_write
    from gloveapp.conversations.models import IdempotentRequest
    from gloveapp.lib.db.partitions import day_start, partition_name

    table = IdempotentRequest._meta.db_table
    midnight = day_start(timezone.now())
    claimed, release = threading.Event(), threading.Event()
    performed: list[str] = []
    outcomes: dict[str, object] = {}

    def write(name: str, perform) -> None:
        try:
            outcomes[name] = idempotent_write(
                user_id=owner.pk, key=KEY, scope="append", fingerprint="f", perform=perform
            )
        except BaseException as error:  # inspected below
            outcomes[name] = error
        finally:
            connections.close_all()

    def first_perform():
        # The first request's row belongs to the day before (sent at 23:59:59).
        IdempotentRequest.objects.filter(user=owner, key=KEY).update(
            created_at=midnight - timedelta(seconds=1)
        )
        performed.append("first")
        claimed.set()
        release.wait(60)
        return {"answer": "first"}

    def second_perform():
        performed.append("second")
        return {"answer": "second"}

    first = threading.Thread(target=write, args=("first", first_perform))
    first.start()
    assert claimed.wait(60)
    second = threading.Thread(target=write, args=("second", second_perform))
    second.start()
    # The second writer waits on the key's advisory lock while the first is open.
    for _ in range(600):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
            if cursor.fetchone()[0]:
                break
        second.join(0.05)
    else:
        pytest.fail("the second writer never waited for the first")
    release.set()
    first.join(60)
    second.join(60)

    assert outcomes == {
        "first": ({"answer": "first"}, False),
        "second": ({"answer": "first"}, True),
    }
    assert performed == ["first"]
    assert IdempotentRequest.objects.filter(user=owner, key=KEY).count() == 1
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text, created_at FROM {table}")
        [(partition, created_at)] = cursor.fetchall()
    assert created_at < midnight
    assert partition != partition_name(table, midnight)
    # Without the lock the database would have taken today's copy: its unique index is per day.
    with transaction.atomic():
        IdempotentRequest.objects.create(user=owner, key=KEY, scope="append", fingerprint="f")
        assert IdempotentRequest.objects.filter(user=owner, key=KEY).count() == 2
        transaction.set_rollback(True)
