"""A long chat's page: the newest messages only, earlier ones loaded page by page as the
reader scrolls up (htmx, keyset by seq), and the same number of queries at any length."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gloveapp.conversations.models import Message, Session
from gloveapp.conversations.services import messages_append
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import ToolCall, ToolResult, ToolResultData
from gloveapp.pages.context import HISTORY_PAGE
from tests.pages.conftest import HTMX, client_for, htmx_target

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _seed(session: Session, count: int) -> None:
    """`count` more plain messages, alternating person and agent (rows written directly:
    thousands of appends would only slow the test)."""
    start = Session.objects.get(pk=session.pk).last_seq
    Message.objects.bulk_create(
        Message(
            session=session,
            seq=seq,
            sender="user" if seq % 2 else "agent",
            text=f"message {seq}",
        )
        for seq in range(start + 1, start + count + 1)
    )
    Session.objects.filter(pk=session.pk).update(last_seq=start + count)


def _seqs(html: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<li class="msg[^"]*" data-seq="(\d+)"', html)]


def _earlier(html: str) -> str | None:
    match = re.search(r'hx-get="(/sessions/[^"]+/history\?before=\d+)"', html)
    return match.group(1) if match else None


def test_it_shows_only_the_newest_page_of_a_long_chat(session, owner_client):
    _seed(session, 3000)

    html = owner_client.get(f"/sessions/{session.key}/").content.decode()

    assert _seqs(html) == list(range(3000 - HISTORY_PAGE + 1, 3001))
    assert _earlier(html) == f"/sessions/{session.key}/history?before={3000 - HISTORY_PAGE + 1}"


def test_it_loads_every_earlier_message_once_as_the_reader_scrolls_up(session, owner_client):
    _seed(session, 3 * HISTORY_PAGE + 7)
    html = owner_client.get(f"/sessions/{session.key}/").content.decode()
    shown = _seqs(html)

    url = _earlier(html)
    while url:
        part = owner_client.get(url, **HTMX).content.decode()
        assert "<html" not in part
        shown = _seqs(part) + shown
        url = _earlier(part)

    assert shown == list(range(1, 3 * HISTORY_PAGE + 8))


def test_a_short_chat_has_no_earlier_loader(session, owner_client):
    _seed(session, 10)

    html = owner_client.get(f"/sessions/{session.key}/").content.decode()

    assert _seqs(html) == list(range(1, 11))
    assert _earlier(html) is None


def test_the_earlier_link_works_without_javascript(session, owner_client):
    _seed(session, HISTORY_PAGE + 5)

    html = owner_client.get(f"/sessions/{session.key}/?before=6").content.decode()

    assert _seqs(html) == [1, 2, 3, 4, 5]
    assert "Newest messages" in html


def test_a_page_never_splits_a_tool_call_from_its_result(session, owner_client):
    _seed(session, 10)
    messages_append(
        session_id=session.pk,
        messages=[
            CoreMessage(
                sender="agent",
                text="Checking.",
                tool_calls=[ToolCall(tool_name="stock", input_args={}, id="call_1")],
            ),
            CoreMessage(
                sender="user",
                text="tool results",
                tool_results=[
                    ToolResult(
                        tool_name="stock",
                        call_id="call_1",
                        result=ToolResultData(status="success", data="3 left"),
                    )
                ],
            ),
        ],
    )
    _seed(session, HISTORY_PAGE - 1)  # the page's first message would be the result

    html = owner_client.get(f"/sessions/{session.key}/").content.decode()

    assert _seqs(html)[0] == 11  # the call came along
    assert 'class="tool tool--success" data-tool="stock"' in html  # with its result


def test_a_refresh_keeps_what_the_page_shows(session, owner_client):
    _seed(session, 3 * HISTORY_PAGE)
    first = 3 * HISTORY_PAGE - 2 * HISTORY_PAGE + 1  # the reader loaded one earlier page

    html = owner_client.get(
        f"/sessions/{session.key}/?from={first}", **htmx_target("messages")
    ).content.decode()

    assert _seqs(html) == list(range(first, 3 * HISTORY_PAGE + 1))


def test_a_refresh_from_past_the_end_shows_the_newest_page(session, owner_client):
    _seed(session, 2 * HISTORY_PAGE)

    html = owner_client.get(
        f"/sessions/{session.key}/?from=99999", **htmx_target("messages")
    ).content.decode()

    assert _seqs(html) == list(range(HISTORY_PAGE + 1, 2 * HISTORY_PAGE + 1))


def test_a_post_renders_the_newest_page_not_the_history(session, owner_client):
    _seed(session, 2000)

    response = owner_client.post(
        f"/sessions/{session.key}/messages", {"text": "One more espresso."}, **HTMX
    )

    assert response.status_code == 200
    seqs = _seqs(response.content.decode())
    assert len(seqs) == HISTORY_PAGE
    assert seqs[-1] == 2000
    assert "One more espresso." in response.content.decode()  # queued under the history


@pytest.mark.parametrize("query", ["before=x", "before=-1", "from=1.5"])
def test_it_refuses_a_bad_position_naming_it(session, owner_client, query):
    response = owner_client.get(f"/sessions/{session.key}/?{query}")

    assert response.status_code == 400
    assert query.split("=")[0].encode() in response.content


def test_the_history_needs_a_position(session, owner_client):
    response = owner_client.get(f"/sessions/{session.key}/history")

    assert response.status_code == 400
    assert b"before" in response.content


def test_an_outsider_cannot_read_the_history(session, other_user):
    _seed(session, 5)

    response = client_for(other_user).get(f"/sessions/{session.key}/history?before=5")

    assert response.status_code == 404


def test_its_queries_do_not_grow_with_the_history(session, owner_client):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert owner_client.get(f"/sessions/{session.key}/").status_code == 200
        assert "OFFSET" not in " ".join(q["sql"] for q in captured).upper()
        return len(captured)

    _seed(session, 20)
    few = queries()
    _seed(session, 2000)
    many = queries()

    assert many == few
