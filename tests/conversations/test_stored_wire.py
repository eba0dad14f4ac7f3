"""Each message keeps its wire text (issue 13): a history is served by joining the stored
texts, and that must be exactly what rebuilding every message from its columns and
rendering it with DRF's JSON renderer gives, for every kind of message, on every database."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from rest_framework.renderers import JSONRenderer

from gloveapp.conversations import selectors, serialization, services
from gloveapp.conversations.models import Message, Session
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import TokenUsage

pytestmark = [pytest.mark.postgres]

KINDS = [
    {
        "sender": "user",
        "text": 'Line\u2028and\u2029para \u00e9 \U0001f600 <b>&</b> "q"',
        "id": "m1",
    },
    {
        "sender": "agent",
        "text": "",
        "tool_calls": [{"id": "c1", "tool_name": "get_menu", "input_args": {"n": 1.5, "z": [1]}}],
        "reasoning_content": "hmm",
    },
    {
        "sender": "user",
        "text": "tool results",
        "tool_results": [
            {"tool_name": "get_menu", "call_id": "c1", "result": {"status": "success", "data": 3}}
        ],
        "provider_options": {"b": [1, None], "a": {"y": True}},
    },
    {"sender": "user", "text": "Summary", "is_compaction": True},
    {"sender": "user", "text": "x", "framework_context": "inbox", "is_skill_injection": True},
    {"sender": "agent", "text": "img", "content": [{"type": "text", "text": "hi"}]},
    {"sender": "agent", "text": "big 12345678901234567890 and tiny", "pre_modified_text": "p"},
]


@pytest.fixture
def session(db, django_user_model) -> Session:
    owner = django_user_model.objects.create(username="olive")
    session = services.session_create(owner=owner, session_id="wired", agent_name="coffee")
    services.messages_append(
        session_id=session.pk, messages=[CoreMessage.from_dict(kind) for kind in KINDS]
    )
    return session


def _from_columns(row: Message) -> dict:
    return serialization.message_to_core(row).to_dict()


def test_it_stores_each_message_as_its_columns_read_it_back(session):
    rows = list(Message.objects.filter(session=session).order_by("seq"))

    assert len(rows) == len(KINDS)
    for row in rows:
        assert json.loads(row.wire) == _from_columns(row)
        assert row.wire.encode() == JSONRenderer().render(json.loads(row.wire))


def test_it_answers_a_history_in_the_bytes_drfs_renderer_gives_for_the_columns(session):
    rows = Message.objects.filter(session=session).order_by("seq")
    rebuilt = [_from_columns(row) for row in rows]

    body = selectors.read_owned_messages_json("wired", owner=session.owner, since_compaction=False)

    assert json.loads(body) == rebuilt
    assert body == JSONRenderer().render(json.loads(body))
    assert "\\u2028" in body.decode() and "\U0001f600" in body.decode()


def test_it_answers_from_the_last_compaction_marker_when_asked(session):
    body = selectors.read_owned_messages_json("wired", owner=session.owner, since_compaction=True)

    assert [m["text"] for m in json.loads(body)] == ["Summary", "x", "img", KINDS[-1]["text"]]


def test_it_reads_a_row_without_its_wire_text_from_the_columns(session):
    before = selectors.read_owned_messages_json(
        "wired", owner=session.owner, since_compaction=False
    )
    Message.objects.filter(session=session, seq__in=[2, 3]).update(wire=None)

    after = selectors.read_owned_messages_json("wired", owner=session.owner, since_compaction=False)

    assert json.loads(after) == json.loads(before)


def test_it_answers_none_for_a_session_the_caller_does_not_hold(session, django_user_model):
    outsider = django_user_model.objects.create(username="oscar")

    assert (
        selectors.read_owned_messages_json("wired", owner=outsider, since_compaction=False) is None
    )
    assert (
        selectors.read_owned_messages_json("nope", owner=session.owner, since_compaction=False)
        is None
    )


# -- appends rewrite the session row in place -----------------------------------------------

APPENDED_COLUMNS = {
    "updated_at",
    "last_seq",
    "title",
    "token_count",
    "turn_count",
    "tokens_in_total",
    "tokens_out_total",
    "cache_creation_input_tokens_total",
    "cache_read_input_tokens_total",
}


@pytest.mark.django_db
def test_no_index_of_a_session_holds_a_column_an_append_changes():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Session._meta.db_table)

    indexed = {
        column for info in constraints.values() if info["index"] for column in info["columns"]
    }
    assert indexed & APPENDED_COLUMNS == set()


def test_it_updates_the_session_row_in_place_on_postgresql(session, requires_postgres):
    # A HOT update writes no index entry and leaves no dead version for the next append to
    # step over. PostgreSQL counts both kinds per transaction (the test's, fixture included):
    # the counts after the fixture are taken away. The fixture's first person message titles
    # the chat, which the admin's trigram index on the title sees: once per chat, not HOT.
    def counts(cursor) -> tuple[int, int]:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated(%s::regclass),"
            " pg_stat_get_xact_tuples_hot_updated(%s::regclass)",
            [Session._meta.db_table] * 2,
        )
        return cursor.fetchone()

    with connection.cursor() as cursor:
        before_updated, before_hot = counts(cursor)
        for _ in range(3):
            services.messages_append(
                session_id=session.pk, messages=[CoreMessage(sender="user", text="again")]
            )
            services.tokens_add(session_id=session.pk, usage=_usage())
        after_updated, after_hot = counts(cursor)
    updated, hot = after_updated - before_updated, after_hot - before_hot

    assert updated == 6 and hot == updated


def _usage() -> TokenUsage:
    return TokenUsage(tokens_in=3, tokens_out=2)


@pytest.mark.django_db
def test_raw_writes_store_times_as_the_orm_compares_them():
    # The append's statements are raw SQL: SQLite keeps datetimes as naive UTC text, and an
    # aware value written as is (with "+00:00") equals no value the ORM compares it with.
    services.session_create(session_id="timed")
    services.messages_append(session_id="timed", messages=[CoreMessage(sender="user", text="x")])
    services.turn_record(
        session_id="timed", messages=[CoreMessage(sender="agent", text="y")], usage=_usage()
    )

    stamped = Session.objects.get(pk="timed").updated_at

    assert Session.objects.filter(pk="timed", updated_at=stamped).exists()
