"""REST reads that never send a whole history or a whole list: keyset pages of a session's
messages (`limit`, `before`, `after`), the unpaged store GET's cap, and `GET /api/sessions`
pages (`limit`, `cursor` from the `Link` header)."""

from __future__ import annotations

import json
import re

import pytest

from gloveapp.conversations import selectors
from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.services import messages_append
from gloveapp.core.types import Message as CoreMessage

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

URL = "/api/sessions/glove_owner_1/messages"


def _seed(session_id: str, count: int) -> None:
    session = Session.objects.get(key=session_id)
    start = session.last_seq
    Message.objects.bulk_create(
        Message(session=session, seq=seq, sender="user", text=f"m{seq}", wire=None)
        for seq in range(start + 1, start + count + 1)
    )
    Session.objects.filter(pk=session.pk).update(last_seq=start + count)


def _texts(page: dict) -> list[str]:
    return [message["text"] for message in page["messages"]]


def test_it_pages_a_history_newest_first_in_chronological_pages(owner_client, session_id):
    _seed(session_id, 25)

    page = owner_client.get(f"{URL}?limit=10").json()

    assert _texts(page) == [f"m{n}" for n in range(16, 26)]
    assert (page["firstSeq"], page["lastSeq"]) == (16, 25)
    assert (page["hasEarlier"], page["hasLater"]) == (True, False)


def test_it_walks_back_with_before_and_forward_with_after(owner_client, session_id):
    _seed(session_id, 25)

    older = owner_client.get(f"{URL}?limit=10&before=16").json()
    oldest = owner_client.get(f"{URL}?limit=10&before={older['firstSeq']}").json()
    newer = owner_client.get(f"{URL}?limit=10&after=5").json()

    assert _texts(older) == [f"m{n}" for n in range(6, 16)]
    assert _texts(oldest) == [f"m{n}" for n in range(1, 6)]
    assert oldest["hasEarlier"] is False
    assert _texts(newer) == [f"m{n}" for n in range(6, 16)]
    assert (newer["hasEarlier"], newer["hasLater"]) == (True, True)


def test_after_and_before_together_read_between_them(owner_client, session_id):
    _seed(session_id, 25)

    page = owner_client.get(f"{URL}?after=3&before=7").json()

    assert _texts(page) == ["m4", "m5", "m6"]


def test_a_page_reads_from_the_last_compaction_with_since_compaction(owner_client, session_id):
    _seed(session_id, 5)
    session = Session.objects.get(key=session_id)
    messages_append(
        session_id=session.pk,
        messages=[
            CoreMessage(sender="user", text="summary", is_compaction=True),
            CoreMessage(sender="user", text="after"),
        ],
    )

    page = owner_client.get(f"{URL}?limit=50&since_compaction=1").json()

    assert _texts(page) == ["summary", "after"]
    assert page["hasEarlier"] is False


def test_an_empty_history_is_an_empty_page(owner_client, session_id):
    page = owner_client.get(f"{URL}?limit=5").json()

    assert page == {
        "messages": [],
        "firstSeq": None,
        "lastSeq": None,
        "hasEarlier": False,
        "hasLater": False,
    }


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("before=-1", "before"),
        ("after=1e3", "after"),
        ("before=99999999999", "before"),
    ],
)
def test_it_refuses_a_bad_paging_parameter_naming_it(owner_client, session_id, query, field):
    response = owner_client.get(f"{URL}?{query}")

    assert response.status_code == 400
    assert response.json()["field"] == field


def test_an_outsider_gets_404_for_a_page(other_client, owner_client, session_id):
    _seed(session_id, 3)

    assert other_client.get(f"{URL}?limit=2").status_code == 404


def test_the_unpaged_get_keeps_glove_s_array_for_a_normal_history(owner_client, session_id):
    _seed(session_id, 30)

    body = owner_client.get(URL).json()

    assert [message["text"] for message in body] == [f"m{n}" for n in range(1, 31)]


def test_the_unpaged_get_of_a_history_past_its_cap_names_the_way_out(
    owner_client, session_id, settings
):
    settings.GLOVE_HISTORY_UNPAGED_MAX = 20
    _seed(session_id, 21)

    response = owner_client.get(URL)

    assert response.status_code == 400
    body = response.json()
    assert (body["field"], body["code"]) == ("limit", "history_too_long")
    assert "21 messages" in body["error"]
    assert "before=" in body["error"]
    assert "since_compaction" in body["error"]
    assert owner_client.get(f"{URL}?since_compaction=1").status_code == 400  # no marker
    assert owner_client.get(f"{URL}?limit=20").status_code == 200


def test_the_cap_counts_only_what_since_compaction_reads(owner_client, session_id, settings):
    settings.GLOVE_HISTORY_UNPAGED_MAX = 20
    _seed(session_id, 30)
    messages_append(
        session_id=Session.objects.get(key=session_id).pk,
        messages=[CoreMessage(sender="user", text="summary", is_compaction=True)],
    )

    response = owner_client.get(f"{URL}?since_compaction=1")

    assert response.status_code == 200
    assert [message["text"] for message in response.json()] == ["summary"]


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _seed_wired(session_id: str, texts: list[str]) -> None:
    messages_append(
        session_id=Session.objects.get(key=session_id).pk,
        messages=[CoreMessage(sender="user", text=text) for text in texts],
    )


def test_the_unpaged_get_has_no_cap_unless_the_operator_sets_one(
    owner_client, session_id, settings
):
    assert settings.GLOVE_HISTORY_UNPAGED_MAX is None
    _seed(session_id, 2500)  # longer than one chunk (1,000): streamed

    response = owner_client.get(URL)

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/json"
    texts = [message["text"] for message in json.loads(_body(response))]
    assert texts == [f"m{n}" for n in range(1, 2501)]


def test_a_streamed_history_is_byte_for_byte_the_one_query_answer(
    owner_client, session_id, monkeypatch
):
    _seed_wired(session_id, [f'm{n} é ☕ " \\ \u2028' for n in range(1, 24)])
    _seed(session_id, 3)  # stored before Message.wire existed: rebuilt from the columns
    _seed_wired(session_id, ["last"])
    whole = owner_client.get(URL)
    assert not whole.streaming

    monkeypatch.setattr(selectors, "HISTORY_CHUNK", 5)
    streamed = owner_client.get(URL)

    assert streamed.streaming
    assert _body(streamed) == whole.content
    assert streamed["Content-Type"] == whole["Content-Type"]
    assert len(json.loads(whole.content)) == 27


def test_a_streamed_history_since_compaction_starts_at_the_marker(
    owner_client, session_id, monkeypatch
):
    _seed(session_id, 12)
    _seed_wired(session_id, ["older"])
    messages_append(
        session_id=Session.objects.get(key=session_id).pk,
        messages=[CoreMessage(sender="user", text="summary", is_compaction=True)],
    )
    _seed_wired(session_id, [f"n{n}" for n in range(11)])
    whole = owner_client.get(f"{URL}?since_compaction=1")
    monkeypatch.setattr(selectors, "HISTORY_CHUNK", 4)

    streamed = owner_client.get(f"{URL}?since_compaction=1")

    assert streamed.streaming and not whole.streaming
    assert _body(streamed) == whole.content
    assert [m["text"] for m in json.loads(whole.content)] == ["summary"] + [
        f"n{n}" for n in range(11)
    ]


def test_an_outsider_gets_404_for_a_long_history(other_client, session_id, monkeypatch):
    monkeypatch.setattr(selectors, "HISTORY_CHUNK", 4)
    _seed(session_id, 10)

    assert other_client.get(URL).status_code == 404


# -- GET /api/sessions ----------------------------------------------------------------------


def _next(response) -> str | None:
    match = re.search(r'<([^>]+)>; rel="next"', response.get("Link", ""))
    return match.group(1) if match else None


def test_it_pages_the_session_list_through_the_link_header(owner, owner_client):
    Session.objects.bulk_create(
        Session(id=f"s{n:04d}", key=f"s{n:04d}", owner=owner) for n in range(23)
    )

    response = owner_client.get("/api/sessions?limit=10")
    seen = [s["sessionId"] for s in response.json()]
    while (url := _next(response)) is not None:
        response = owner_client.get(url)
        seen += [s["sessionId"] for s in response.json()]

    assert len(seen) == 23
    assert len(set(seen)) == 23
    newest = Session.objects.filter(owner=owner).order_by("-created_at", "-key")
    assert seen == [s.key for s in newest]


def test_the_session_list_is_bounded_without_a_limit(owner, owner_client):
    Session.objects.bulk_create(
        Session(id=f"s{n:04d}", key=f"s{n:04d}", owner=owner) for n in range(105)
    )

    response = owner_client.get("/api/sessions")

    assert len(response.json()) == 100
    assert "cursor=" in _next(response)


def test_the_next_page_keeps_the_lists_filters(owner, owner_client, session_id):
    Session.objects.bulk_create(
        Session(id=f"s{n:04d}", key=f"s{n:04d}", owner=owner) for n in range(3)
    )

    response = owner_client.get("/api/sessions?limit=2&topLevel=true")

    assert "topLevel=true" in _next(response)


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=501", "limit"), ("cursor=zzz", "cursor")],
)
def test_it_refuses_a_bad_session_list_parameter_naming_it(owner_client, query, field):
    response = owner_client.get(f"/api/sessions?{query}")

    assert response.status_code == 400
    assert response.json()["field"] == field


# -- GET /api/sessions/<id>/inbox -----------------------------------------------------------


def _inbox(session_id: str, consumed: int, pending: int) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from inbox.models import InboxItem

    session = Session.objects.get(key=session_id)
    start = timezone.now() - timedelta(days=1)
    InboxItem.objects.bulk_create(
        InboxItem(
            id=f"{session.pk}:{status}{n:04d}",
            key=f"{status}{n:04d}",
            session=session,
            tag="watch",
            request="r",
            response="ok" if status == "consumed" else None,
            status=status,
            created_at=start + timedelta(seconds=n),
        )
        for status, count in (("consumed", consumed), ("pending", pending))
        for n in range(count)
    )


INBOX = "/api/sessions/glove_owner_1/inbox"


def test_the_inbox_returns_open_items_and_only_the_newest_consumed(owner_client, session_id):
    _inbox(session_id, consumed=130, pending=2)

    items = owner_client.get(INBOX).json()

    assert [i["id"] for i in items if i["status"] == "pending"] == ["pending0000", "pending0001"]
    consumed = [i["id"] for i in items if i["status"] == "consumed"]
    assert consumed == [f"consumed{n:04d}" for n in range(30, 130)]


def test_consumed_items_are_read_in_pages_newest_first(owner_client, session_id):
    _inbox(session_id, consumed=130, pending=1)

    response = owner_client.get(f"{INBOX}?status=consumed&limit=50")
    seen = [i["id"] for i in response.json()]
    while (url := _next(response)) is not None:
        response = owner_client.get(url)
        seen += [i["id"] for i in response.json()]

    assert seen == [f"consumed{n:04d}" for n in reversed(range(130))]


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=5", "status"), ("status=consumed&limit=0", "limit"), ("status=gone", "status")],
)
def test_it_refuses_a_bad_inbox_parameter_naming_it(owner_client, session_id, query, field):
    response = owner_client.get(f"{INBOX}?{query}")

    assert response.status_code == 400
    assert response.json()["field"] == field
