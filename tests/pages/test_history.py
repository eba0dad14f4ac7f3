"""The conversation as the chat page shows it: whole history, dividers, tool results."""

from __future__ import annotations

import re

import pytest
from django.db import transaction

from gloveapp.conversations.services import messages_append
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.core.types import Message, ToolCall, ToolResult, ToolResultData
from gloveapp.live.eventlog import record_event
from gloveapp.live.models import LiveEvent
from inbox.services import inbox_item_add, inbox_item_resolve, inbox_item_update
from tests.pages.conftest import client_for, htmx_target

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def page(client, session, **headers) -> str:
    response = client.get(f"/sessions/{session.pk}/", **headers)
    assert response.status_code == 200
    return response.content.decode()


def section(html: str, name: str) -> str:
    match = re.search(rf'data-section="{name}">(.*?)</ul>', html, re.S)
    assert match, f"no {name} section"
    return match.group(1)


def test_it_shows_messages_from_before_a_compaction_behind_a_divider(session, owner_client):
    messages_append(
        session_id=session.pk,
        messages=[
            Message(sender="user", text="An espresso, please."),
            Message(sender="agent", text="One espresso coming up."),
            Message(sender="user", text="Customer ordered an espresso.", is_compaction=True),
            Message(sender="user", text="And a croissant."),
        ],
    )

    html = page(owner_client, session)

    assert html.count('role="separator"') == 1
    before, after = html.split('role="separator"')
    assert "An espresso, please." in before
    assert "One espresso coming up." in before
    assert "And a croissant." in after
    assert "Customer ordered an espresso." in after  # the summary, folded under the divider


def test_it_shows_a_divider_at_every_compaction(session, owner_client):
    messages_append(
        session_id=session.pk,
        messages=[
            Message(sender="user", text="one"),
            Message(sender="user", text="summary one", is_compaction=True),
            Message(sender="user", text="two"),
            Message(sender="user", text="summary two", is_compaction=True),
        ],
    )
    assert page(owner_client, session).count('role="separator"') == 2


def test_it_folds_tool_results_under_their_call_instead_of_a_user_bubble(
    session, owner_client, staff
):
    messages_append(
        session_id=session.pk,
        messages=[
            Message(sender="user", text="Do you have decaf?"),
            Message(
                sender="agent",
                text="Let me check.",
                tool_calls=[
                    ToolCall(tool_name="mystery_lookup", input_args={"q": "decaf"}, id="call_1")
                ],
            ),
            Message(
                sender="user",
                text="tool results",
                tool_results=[
                    ToolResult(
                        tool_name="mystery_lookup",
                        call_id="call_1",
                        result=ToolResultData.success({"found": "Swiss water decaf"}),
                    )
                ],
            ),
        ],
    )

    html = page(owner_client, session)

    assert ">tool results<" not in html
    assert html.count('class="msg msg--user"') == 1
    assert 'data-tool="mystery_lookup"' in html
    # The customer reads the tool in plain words and its state; the data is for staff.
    assert "Mystery lookup" in html and ">done<" in html
    assert "Swiss water decaf" not in html and ">mystery_lookup<" not in html
    assert "Swiss water decaf" in page(client_for(staff), session)


def test_it_shows_a_failed_tool_with_its_message(session, owner_client):
    messages_append(
        session_id=session.pk,
        messages=[
            Message(sender="agent", tool_calls=[ToolCall(tool_name="grind", id="c9")]),
            Message(
                sender="user",
                text="tool results",
                tool_results=[
                    ToolResult(
                        tool_name="grind",
                        call_id="c9",
                        result=ToolResultData.error("Grinder jammed"),
                    )
                ],
            ),
        ],
    )
    html = page(owner_client, session)
    assert "tool--error" in html
    assert "Grinder jammed" in html


def test_it_styles_framework_messages_apart_from_the_chat(session, owner_client):
    messages_append(
        session_id=session.pk,
        messages=[
            Message(
                sender="user",
                text="[Inbox] restock_watch resolved: Yirgacheffe is back.",
                framework_context="inbox",
            )
        ],
    )
    html = page(owner_client, session)
    assert 'class="note"' in html
    assert 'data-context="inbox"' in html
    assert 'class="msg msg--user"' not in html


def test_it_sorts_the_inbox_into_watching_resolved_and_delivered(session, owner_client):
    def item(item_id: str, request: str) -> None:
        inbox_item_add(
            session_id=session.pk,
            item=CoreInboxItem(id=item_id, tag="restock_watch", request=request),
        )

    item("inbox_1_watch", "Tell me when Yirgacheffe is back")
    item("inbox_2_done", "Tell me when Sidamo is back")
    item("inbox_3_gone", "Tell me when Kenya AA is back")
    inbox_item_resolve(item_id="inbox_2_done", response="Sidamo arrived this morning")
    inbox_item_resolve(item_id="inbox_3_gone", response="Kenya AA is on the shelf")
    inbox_item_update(session_id=session.pk, item_id="inbox_3_gone", updates={"status": "consumed"})

    html = page(owner_client, session)

    assert "Yirgacheffe" in section(html, "watching")
    assert "Sidamo arrived this morning" in section(html, "resolved")
    assert "Kenya AA is on the shelf" in section(html, "delivered")
    assert "<details" in html.split('data-section="resolved"')[1]


def test_it_renders_one_partial_for_the_htmx_target_it_names(session, owner_client):
    messages_append(session_id=session.pk, messages=[Message(sender="user", text="A flat white")])

    for target in ["messages", "tasks", "inbox", "slots"]:
        html = page(owner_client, session, **htmx_target(target))
        assert html.lstrip().startswith(f'<section id="{target}"'), target
        assert "<html" not in html

    assert "A flat white" in page(owner_client, session, **htmx_target("messages"))


def test_it_tells_caches_that_the_page_varies_with_the_htmx_headers(session, owner_client):
    response = owner_client.get(f"/sessions/{session.pk}/")
    assert {"HX-Request", "HX-Target"} <= {h.strip() for h in response["Vary"].split(",")}


def test_it_renders_the_whole_page_for_an_unknown_htmx_target(session, owner_client):
    html = page(owner_client, session, **htmx_target("something-else"))
    assert "<html" in html


def test_it_embeds_the_latest_live_event_id_so_the_socket_resumes_there(session, owner_client):
    messages_append(session_id=session.pk, messages=[Message(sender="user", text="Hi")])
    # Another stream's events are not counted in this one's: ids are per stream.
    with transaction.atomic():
        record_event(stream="session:elsewhere", type="session.updated", payload={})
    latest = LiveEvent.objects.filter(stream=f"session:{session.pk}").latest("id")

    html = page(owner_client, session)

    assert latest.seq == LiveEvent.objects.filter(stream=f"session:{session.pk}").count()
    assert f'data-last-event-id="{latest.seq}"' in html
    assert f'data-live-url="/ws/sessions/{session.pk}/"' in html
