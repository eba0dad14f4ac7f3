"""GLOVE_MAX_QUEUED_MESSAGES holds under any concurrency: the count and the insert are one
decision, made under the session's row lock (PostgreSQL) or the database's write lock
(SQLite, whose transactions begin IMMEDIATE).

Bursts of concurrent posts on fresh chats: never more accepted than the bound, and every
post beyond it refused with `QueueFull` (the pages and the API answer it with 429).
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from gloveapp.conversations.models import Session
from gloveapp.turns.models import Turn
from gloveapp.turns.submit import QueueFull, turn_submit
from tests.pg_budget import django_concurrency_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

BOUND = 5
POSTS_PER_BURST = 20


def _bursts(owner, count: int) -> list[tuple[int, int]]:
    """`count` bursts of POSTS_PER_BURST concurrent posts, each on a chat of its own;
    the same threads (and connections) serve every burst. Returns (accepted, refused)."""
    sessions = [
        Session.objects.create(id=f"burst-{n}", key=f"burst-{n}", owner=owner, title="burst")
        for n in range(count)
    ]
    workers = django_concurrency_for(POSTS_PER_BURST)
    start = threading.Barrier(workers)
    outcomes: list[list] = [[] for _ in range(count)]
    errors: list[BaseException] = []

    def work(first: int) -> None:
        try:
            for burst, session in enumerate(sessions):
                start.wait(timeout=60)
                for _ in range(first, POSTS_PER_BURST, workers):
                    try:
                        turn_submit(session_id=session.pk, text="hi", user_id=None)
                        outcomes[burst].append("accepted")
                    except QueueFull:
                        outcomes[burst].append("refused")
        except BaseException as error:
            errors.append(error)
            start.abort()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not errors, errors[:3]
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return [(burst.count("accepted"), burst.count("refused")) for burst in outcomes]


def test_it_accepts_at_most_the_bound_from_bursts_of_concurrent_posts(settings, django_user_model):
    settings.GLOVE_MAX_QUEUED_MESSAGES = BOUND
    owner = django_user_model.objects.create_user("bursty")
    count = 100 if connection.vendor == "postgresql" else 10

    results = _bursts(owner, count)

    assert all(accepted + refused == POSTS_PER_BURST for accepted, refused in results)
    over = [accepted for accepted, _ in results if accepted > BOUND]
    assert over == [], f"{len(over)} of {count} bursts accepted more than {BOUND}: {over}"
    assert all(accepted == BOUND for accepted, _ in results)  # and not fewer
    queued = Turn.objects.filter(status=Turn.Status.QUEUED).count()
    assert queued == BOUND * count


@pytest.mark.postgres
def test_it_holds_the_bound_on_postgresql_too(settings, django_user_model, requires_postgres):
    """The same bursts, marked for the PostgreSQL pass (where the race lived)."""
    test_it_accepts_at_most_the_bound_from_bursts_of_concurrent_posts(settings, django_user_model)
