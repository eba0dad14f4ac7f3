"""Many writers appending to one session at once (group commit on PostgreSQL, issue 13).

Concurrent appends to one session may share a statement and a commit; what each writer
sees must not change: its messages contiguous and in order, every message once, and one
`message.appended` event per message, in `seq` order.
"""

from __future__ import annotations

import pytest
from django.db import connection

from gloveapp.conversations import services
from gloveapp.conversations.models import Message
from gloveapp.core.types import Message as CoreMessage
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream
from tests.helpers import run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 8
REQUESTS = 15


def test_it_keeps_every_writers_messages_whole_ordered_and_announced_once():
    services.session_create(session_id="busy")

    def append(worker: int) -> list[list[int]]:
        seqs = []
        for n in range(REQUESTS):
            rows = services.messages_append(
                session_id="busy",
                messages=[CoreMessage(sender="user", text=f"w{worker} r{n} m{i}") for i in (0, 1)],
            )
            seqs.append([row.seq for row in rows])
        return seqs

    outcomes = run_in_threads(WRITERS, append)

    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    rows = list(
        Message.objects.filter(session_id="busy").order_by("seq").values_list("seq", "text")
    )
    total = WRITERS * REQUESTS * 2
    assert [seq for seq, _ in rows] == list(range(1, total + 1))
    texts = dict(rows)
    for worker, seqs in enumerate(outcomes):
        # What each call returned is what was stored, and a writer's requests keep its order.
        assert [texts[s] for pair in seqs for s in pair] == [
            f"w{worker} r{n} m{i}" for n in range(REQUESTS) for i in (0, 1)
        ]
        assert all(b == a + 1 for a, b in seqs)
    events = list(
        LiveEvent.objects.filter(stream=session_stream("busy"), type="message.appended")
        .order_by("id")
        .values_list("payload", flat=True)
    )
    assert [event["seq"] for event in events] == list(range(1, total + 1))
    assert [event["message"]["text"] for event in events] == [text for _, text in rows]


def test_it_refuses_every_concurrent_writer_of_a_deleted_session():
    session = services.session_create(session_id="gone")
    services.session_delete(session=session)

    outcomes = run_in_threads(
        WRITERS,
        lambda worker: services.messages_append(
            session_id="gone", messages=[CoreMessage(sender="user", text=f"w{worker}")]
        ),
    )

    assert all(isinstance(outcome, services.SessionGone) for outcome in outcomes), outcomes
    assert not Message.objects.filter(session_id="gone").exists()


def test_it_announces_a_chats_title_once_when_its_first_words_come_again():
    # An append names an untitled chat; later appends repeating those first words found the
    # title already set, and announced it again each time (an event and a commit more).
    services.session_create(session_id="named")
    for _ in range(3):
        services.messages_append(
            session_id="named", messages=[CoreMessage(sender="user", text="A flat white, please.")]
        )

    updates = LiveEvent.objects.filter(stream=session_stream("named"), type="session.updated")
    assert [e.payload["session"]["title"] for e in updates.order_by("id")] == [
        "",  # created
        "A flat white, please.",
    ]


# -- early lock release (PostgreSQL) ------------------------------------------------------


def _statements_of_an_append(session_id: str) -> list[tuple[str, str]]:
    """What one append sent, each statement with the connection's synchronous_commit after
    it (what that statement's commit obeyed: autocommit makes each its own transaction)."""
    seen: list[tuple[str, str]] = []

    def watch(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not sql.lstrip().upper().startswith("SHOW"):
            with connection.cursor() as cursor:
                cursor.execute("SHOW synchronous_commit")
                seen.append((" ".join(sql.split()), cursor.fetchone()[0]))
        return result

    message = CoreMessage(sender="user", text="A flat white")
    services.messages_append(session_id=session_id, messages=[message])  # titles the chat
    with connection.execute_wrapper(watch):
        services.messages_append(session_id=session_id, messages=[message])
    return seen


def test_it_lets_go_of_the_session_before_the_disk_and_answers_after_it(requires_postgres):
    services.session_create(session_id="early")

    statements = _statements_of_an_append("early")

    # The append commits without waiting for its flush (the setting is local to its own
    # transaction, which has ended: "on" again after it), then a transaction with an id
    # commits with the usual setting, which waits for the disk up to it: the append's
    # commit included. Only then does the caller get its answer.
    assert len(statements) == 2, statements
    (append, after_append), (wait, after_wait) = statements
    assert append.startswith("WITH s AS ( UPDATE")
    assert "set_config('synchronous_commit', 'off', true)" in append and after_append == "on"
    assert wait == "SELECT pg_current_xact_id()" and after_wait == "on"


def test_it_holds_the_lock_until_the_disk_when_early_release_is_off(requires_postgres, settings):
    settings.GLOVE_EARLY_LOCK_RELEASE = False
    services.session_create(session_id="late")

    statements = _statements_of_an_append("late")

    assert len(statements) == 1, statements
    assert "synchronous_commit" not in statements[0][0]


def test_it_keeps_concurrent_appends_whole_and_ordered_without_early_release(settings):
    settings.GLOVE_EARLY_LOCK_RELEASE = False
    test_it_keeps_every_writers_messages_whole_ordered_and_announced_once()
