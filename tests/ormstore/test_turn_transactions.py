"""A turn's writes are batched: a text turn persists in at most two transactions (issue 13).

Counted through the public agent API with `DjangoStore`: every commit of an atomic block,
plus every write statement run outside one (autocommit makes each its own transaction).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from gloveapp.core import Glove
from gloveapp.core.types import Message, ToolCall
from gloveapp.ormstore.store import DjangoStore
from tests.ormstore.test_agent_loop import agent_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITES = ("INSERT", "UPDATE", "DELETE", "WITH")


@contextmanager
def counting_transactions(monkeypatch) -> Iterator[list[str]]:
    transactions: list[str] = []
    real_commit = connection.commit

    def commit() -> None:
        transactions.append("commit")
        real_commit()

    def watch(execute, sql, params, many, context):
        if not connection.in_atomic_block and sql.lstrip().upper().startswith(WRITES):
            transactions.append(sql.split(None, 1)[0])
        return execute(sql, params, many, context)

    monkeypatch.setattr(connection, "commit", commit)
    with connection.execute_wrapper(watch):
        yield transactions


def agent(store: DjangoStore, script: list) -> Glove:
    return agent_for(store, script)[0]


def test_it_persists_a_text_turn_in_two_transactions(monkeypatch):
    store = DjangoStore("batched")
    glove = agent(store, ["Hi.", "Hello! What can I get you?"])
    async_to_sync(glove.process_request)("warm-up")  # the session row exists from here on

    with counting_transactions(monkeypatch) as transactions:
        async_to_sync(glove.process_request)("A flat white, please.")

    assert len(transactions) <= 2, transactions
    history = async_to_sync(store.get_messages)()
    assert [m.text for m in history][-2:] == ["A flat white, please.", "Hello! What can I get you?"]
    assert async_to_sync(store.get_turn_count)() == 2


def test_it_persists_a_one_tool_turn_in_four_transactions(monkeypatch):
    store = DjangoStore("batched-tool")
    glove = agent(
        store,
        [
            "Hi.",
            Message(
                sender="agent",
                text="",
                tool_calls=[ToolCall("check_stock", {"product": "Yirgacheffe"}, "t1")],
            ),
            "It is out of stock.",
        ],
    )
    async_to_sync(glove.process_request)("warm-up")

    with counting_transactions(monkeypatch) as transactions:
        async_to_sync(glove.process_request)("Do you have Yirgacheffe?")

    # The request, the tool-calling reply, the tool results, the final reply.
    assert len(transactions) <= 4, transactions
    assert async_to_sync(store.get_turn_count)() == 3


def test_a_reply_announces_its_messages_then_the_counters_it_added():
    from gloveapp.live.models import LiveEvent
    from gloveapp.live.streams import session_stream

    store = DjangoStore("announced")
    glove = agent(store, ["Hi.", "Hello!"])
    async_to_sync(glove.process_request)("warm-up")
    seen = LiveEvent.objects.filter(stream=session_stream("announced")).order_by("-id")[0].id

    async_to_sync(glove.process_request)("A flat white, please.")

    events = [
        (e.type, e.payload)
        for e in LiveEvent.objects.filter(stream=session_stream("announced"), id__gt=seen)
    ]
    assert [(t, p.get("message", {}).get("text")) for t, p in events] == [
        ("message.appended", "A flat white, please."),
        ("message.appended", "Hello!"),
        ("session.updated", None),
    ]
    session = events[-1][1]["session"]
    assert (session["id"], session["turn_count"]) == ("announced", 2)
    # On PostgreSQL the statement builds this payload itself: the same as the Python one.
    from gloveapp.conversations.models import Session
    from gloveapp.conversations.services import session_payload

    assert events[-1][1] == session_payload(Session.objects.get(pk="announced"))
    assert session["token_count"] == async_to_sync(store.get_token_count)() > 0
    assert session["title"] == "warm-up"


def test_a_replys_announcement_names_the_session_by_its_owners_own_id(django_user_model):
    """The owner's live stream speaks their key, also when another user held the id first."""
    from gloveapp.conversations.services import session_create
    from gloveapp.live.models import LiveEvent
    from gloveapp.live.streams import session_stream

    session_create(owner=django_user_model.objects.create_user("first"), session_id="shared")
    mine = session_create(owner=django_user_model.objects.create_user("me"), session_id="shared")
    assert mine.id != "shared"
    glove = agent(DjangoStore(mine.id), ["Hello!"])

    async_to_sync(glove.process_request)("A flat white, please.")

    announced = [
        e.payload["session"]["id"]
        for e in LiveEvent.objects.filter(stream=session_stream(mine.id), type="session.updated")
    ]
    assert announced and set(announced) == {"shared"}
