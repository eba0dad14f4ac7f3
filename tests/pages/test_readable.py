"""What a person reads on the chat pages: JSON as JSON, plain times, turns as people count."""

from __future__ import annotations

import re

import pytest

from gloveapp.conversations.services import messages_append
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message, ToolCall, ToolResult, ToolResultData
from inbox.services import inbox_item_add
from tests.pages.conftest import client_for
from tests.pages.test_history import page

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_it_shows_staff_tool_inputs_and_results_as_json_not_python(session, owner_client, staff):
    messages_append(
        session_id=session.pk,
        messages=[
            Message(
                sender="agent",
                text="",
                tool_calls=[ToolCall("no_such_tool", {"payment": "saved_card"}, "call_1")],
            ),
            Message(
                sender="user",
                text="",
                tool_results=[
                    ToolResult(
                        "no_such_tool",
                        ToolResultData(status="success", data={"blocking": False, "note": None}),
                        "call_1",
                    )
                ],
            ),
        ],
    )

    # The customer reads no JSON at all; staff read it as JSON, under Details.
    assert "&quot;payment&quot;" not in page(owner_client, session)
    html = page(client_for(staff), session)

    assert "&quot;payment&quot;: &quot;saved_card&quot;" in html
    assert "&quot;blocking&quot;: false" in html
    assert "&quot;note&quot;: null" in html
    assert "&#x27;payment&#x27;" not in html
    assert "False" not in html


def test_it_says_just_now_instead_of_zero_minutes(session, owner_client):
    inbox_item_add(
        session_id=session.pk,
        item=CoreInboxItem(id="inbox_1_now", tag="restock_watch", request="Tell me"),
    )

    html = page(owner_client, session)

    assert "0\xa0minutes" not in html and "0 minutes" not in html
    assert "just now" in html


def test_it_counts_turns_as_the_customer_sent_messages(session, owner_client):
    messages_append(
        session_id=session.pk,
        messages=[
            Message(sender="user", text="Menu?"),
            Message(sender="agent", text="", tool_calls=[ToolCall("show_menu", {}, "c1")]),
            Message(sender="user", text="", tool_results=[]),
            Message(sender="agent", text="Here it is."),
            Message(sender="user", text="A Kenya AA, please."),
            Message(sender="agent", text="Added."),
        ],
    )
    session.refresh_from_db()
    session.turn_count = 8  # the runtime counts model calls
    session.save(update_fields=["turn_count"])

    listing = owner_client.get("/").content.decode()

    assert "2 messages" in listing
    assert "8 messages" not in listing


def test_it_titles_a_chat_from_its_first_message(owner, owner_client):
    from gloveapp.conversations.services import session_create

    untitled = session_create(owner=owner, agent_name="coffee", title="")
    messages_append(
        session_id=untitled.pk,
        messages=[Message(sender="user", text="Do you have Yirgacheffe in 250 g bags today?")],
    )

    listing = owner_client.get("/").content.decode()
    chat = page(owner_client, untitled)

    assert "Untitled chat" not in listing
    assert "Do you have Yirgacheffe in 250 g bags" in listing
    assert "Do you have Yirgacheffe in 250 g bags" in chat.split("</h1>")[0]


def test_it_shows_the_inbox_banner_as_friendly_answers_with_the_raw_text_one_click_away(
    session, owner_client
):
    raw = (
        "[Inbox: 2 item(s) resolved]\n"
        '- [restock_watch] Request: "Notify when Yirgacheffe is back" -> Response: '
        '"Back in stock: 12 bags" (resolved 2030-01-01T10:00:00.000Z)\n'
        '- [barista_question] Request: "Oat milk?" -> Response: "Yes, "Oatly"" '
        "(resolved null)"
    )
    messages_append(
        session_id=session.pk,
        messages=[Message(sender="user", text=raw, framework_context="inbox")],
    )

    html = page(owner_client, session)
    note = html.split('data-context="inbox"')[1].split("</details>")[0]
    friendly, _, details = note.partition("<details")
    friendly = " ".join(re.sub(r"<[^>]+>", "", friendly).split())

    assert "Restock watch answered: Back in stock: 12 bags" in friendly
    assert "Barista question answered: Yes, &quot;Oatly&quot;" in friendly
    assert "[Inbox:" not in friendly
    assert "[Inbox: 2 item(s) resolved]" in details


def test_it_tells_the_customer_in_plain_words_that_a_tool_they_declined_did_not_run(
    session, owner_client, staff
):
    from gloveapp.core.executor import permission_denied_message

    messages_append(
        session_id=session.pk,
        messages=[
            Message(sender="agent", text="", tool_calls=[ToolCall("checkout", {}, "call_9")]),
            Message(
                sender="user",
                text="",
                tool_results=[
                    ToolResult(
                        "checkout",
                        ToolResultData.error(permission_denied_message("checkout")),
                        "call_9",
                    )
                ],
            ),
        ],
    )

    html = page(owner_client, session)
    card = html.split('data-tool="checkout"')[1]
    shown, _, details = card.partition("<details")

    assert "You didn&#x27;t allow checkout, so it did not run." in shown
    assert "Permission denied for tool" not in html  # what the agent read is for staff
    card = page(client_for(staff), session).split('data-tool="checkout"')[1]
    shown, _, details = card.partition("<details")
    assert "Permission denied for tool" not in shown
    assert "Permission denied for tool" in details.split("</details>")[0]


def test_it_keeps_a_title_and_skips_framework_messages_when_naming(owner, owner_client):
    from gloveapp.conversations.models import Session
    from gloveapp.conversations.services import session_create

    named = session_create(owner=owner, agent_name="coffee", title="My order")
    untitled = session_create(owner=owner, agent_name="coffee", title="")
    for session in (named, untitled):
        messages_append(
            session_id=session.pk,
            messages=[
                Message(sender="user", text="[Inbox] banner", framework_context="inbox"),
                Message(sender="agent", text="Hello there"),
                Message(sender="user", text="  A   flat white,\nplease  "),
            ],
        )

    assert Session.objects.get(pk=named.pk).title == "My order"
    assert Session.objects.get(pk=untitled.pk).title == "A flat white, please"


@pytest.mark.parametrize(
    "values",
    [
        {"sender": "user", "text": "hi"},
        {"sender": "user", "text": ""},
        {"sender": "agent", "text": "hi"},
        {"sender": "user", "text": "hi", "is_compaction": True},
        {"sender": "user", "text": "hi", "is_skill_injection": True},
        {"sender": "user", "text": "hi", "framework_context": "inbox"},
        {"sender": "user", "text": "tool results", "tool_results": [{"call_id": "c1"}]},
    ],
)
def test_it_names_chats_by_the_same_rule_the_pages_count_turns_by(session, values):
    from gloveapp.conversations.models import PERSON_MESSAGE, is_person_message
    from gloveapp.conversations.models import Message as MessageRow

    row = MessageRow.objects.create(session=session, seq=999, **values)

    assert MessageRow.objects.filter(PERSON_MESSAGE, pk=row.pk).exists() == is_person_message(
        values
    )
