"""The admin's session page: the conversation as a transcript, the raw JSON one click away."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.conversations.services import messages_append, session_create
from gloveapp.core.types import Message, ToolCall, ToolResult, ToolResultData

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

PAGE = "/admin/conversations/session/s1/change/"
BANNER = (
    "[Inbox: 1 item(s) resolved]\n"
    '- [restock_watch] Request: "Notify when Yirgacheffe is back in stock" -> Response: '
    '"Back in stock: 12 bags" (resolved 2030-01-01T10:00:00.000Z)'
)
SCRIPT = "<script>alert('owned')</script>"


class Reading(HTMLParser):
    """Splits a page's text into what is shown and what waits in a closed <details>."""

    VOID = {"br", "img", "input", "meta", "link", "hr", "col", "source", "wbr"}

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[str] = []
        self.folded: list[str] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, hides what follows)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self.VOID:
            return
        closed = tag == "details" and "open" not in dict(attrs)
        self.stack.append((tag, closed))
        if tag == "summary":  # a closed <details> still shows its summary
            self.stack[-1] = (tag, False)

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        hidden = any(hides for _, hides in self.stack) and not (
            self.stack and self.stack[-1][0] == "summary"
        )
        (self.folded if hidden else self.shown).append(data)


def read(html: str) -> tuple[str, str]:
    reading = Reading()
    reading.feed(html)
    squash = lambda parts: " ".join("".join(parts).split())  # noqa: E731
    return squash(reading.shown), squash(reading.folded)


@pytest.fixture
def staff() -> Client:
    user = get_user_model().objects.create_superuser("barista", "barista@brew.test", None)
    client = Client()
    client.force_login(user)
    return client


def a_conversation(*, text: str = "Do you have Yirgacheffe?") -> None:
    call = ToolCall("check_stock", {"coffee": "Ethiopia Yirgacheffe"}, "call_1")
    result = ToolResult(
        "check_stock",
        ToolResultData.success({"name": "Ethiopia Yirgacheffe", "in_stock": False, "bags": 0}),
        "call_1",
    )
    session_create(session_id="s1", title="Yirgacheffe")
    messages_append(
        session_id="s1",
        messages=[
            Message(sender="user", text=text),
            Message(sender="agent", text="Let me check.", tool_calls=[call]),
            Message(sender="user", text="tool results", tool_results=[result]),
            Message(
                sender="user", text="Summary: the customer watches Yirgacheffe.", is_compaction=True
            ),
            Message(sender="user", text=BANNER, framework_context="inbox"),
            Message(sender="agent", text="Good news: it is back."),
        ],
    )


def test_it_shows_the_conversation_as_a_transcript_with_the_json_folded(staff):
    a_conversation()

    shown, folded = read(staff.get(PAGE).content.decode())

    assert "Do you have Yirgacheffe?" in shown
    assert 'check_stock {"coffee": "Ethiopia Yirgacheffe"}' in shown
    assert "check_stock: success" in shown
    assert "Compacted" in shown and "Summary: the customer watches Yirgacheffe." in shown
    assert "Restock watch answered: Back in stock: 12 bags" in shown
    assert "Good news: it is back." in shown
    # The raw JSON is still on the page, behind a click.
    assert '"tool_calls"' not in shown and '"input_args"' not in shown
    assert '"tool_calls"' in folded and '"input_args"' in folded


def test_it_escapes_what_messages_hold_on_the_session_page(staff):
    a_conversation(text=SCRIPT)
    messages_append(
        session_id="s1",
        messages=[
            Message(
                sender="agent", text="", tool_calls=[ToolCall(SCRIPT, {"x": SCRIPT}, "call_2")]
            ),
            Message(
                sender="user",
                text="",
                tool_results=[ToolResult(SCRIPT, ToolResultData.error(SCRIPT), "call_2")],
            ),
        ],
    )

    html = staff.get(PAGE).content.decode()

    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in html


def test_it_shows_a_stopped_call_as_stopped_with_who_stopped_it(staff):
    a_conversation()
    call = ToolCall("checkout", {"items": ["AA"]}, "call_9")
    stopped = ToolResultData(
        status="aborted",
        message="Tool execution was aborted by the user.",
        data={"stoppedBy": "carla", "stoppedAt": "2030-01-01T10:00:00+00:00"},
    )
    messages_append(
        session_id="s1",
        messages=[
            Message(sender="agent", text="", tool_calls=[call]),
            Message(
                sender="user",
                text="tool results",
                tool_results=[ToolResult("checkout", stopped, "call_9")],
            ),
        ],
    )

    shown, _ = read(staff.get(PAGE).content.decode())

    assert "checkout: stopped · Stopped by carla at 2030-01-01T10:00:00+00:00" in shown


def test_a_sessions_page_is_view_only_and_renaming_is_a_link_away(staff):
    a_conversation()

    html = staff.get(PAGE).content.decode()

    # Nothing to save or delete under the conversation; the facts above it, read-only.
    assert "Change session" not in html and 'name="_save"' not in html
    assert "deletelink" not in html and "<form" not in html.split('id="content-main"')[1]
    assert "<h1>Yirgacheffe</h1>" in html and "Open the chat" in html
    assert 'href="?edit=1"' in html
    edit = staff.get(PAGE + "?edit=1").content.decode()
    assert 'name="title"' in edit and "Do you have Yirgacheffe?" not in edit


def test_links_to_a_session_whose_id_the_admin_must_quote_lead_to_it(staff):
    """Ids are `glove_<hex>`: `_40`, `_5F`, `_3A`... read as quoted characters unless the link
    quotes the id. Every link to a session's admin page does, so each one opens it."""
    owner = get_user_model().objects.create_user("ann", password="pw-ann-123456")
    parent = session_create(session_id="glove_40a5", owner=owner, agent_name="coffee")
    child = session_create(session_id="glove_5fb3", owner=owner, agent_name="coffee")
    type(child).objects.filter(pk=child.pk).update(parent=parent, parent_call_id="call_1")

    links = []
    for page in (
        f"/sessions/{parent.pk}/",  # the chat page's "Every turn, in the admin" (staff)
        "/admin/conversations/message/",
    ):
        html = staff.get(page).content.decode()
        links += [
            link for link in _admin_links(html) if link.startswith("/admin/conversations/session/")
        ]
    child_page = staff.get("/admin/conversations/session/glove_5F5fb3/change/")
    assert child_page.status_code == 200
    links += _admin_links(child_page.content.decode())  # "Delegated by" its parent

    session_links = {link for link in links if link.endswith("/change/")}
    assert session_links, links
    for link in session_links:
        assert staff.get(link).status_code == 200, link


def _admin_links(html: str) -> list[str]:
    import re

    return re.findall(r'href="(/admin/conversations/session/[^"]+/change/)"', html)
