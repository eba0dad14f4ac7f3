"""The admin's session page in a real browser: a view-only transcript, the JSON folded away."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.admin.utils import quote

from tests.browser.conftest import STAFF_PASSWORD, screenshot_path
from tests.browser.test_coffee_shop import log_in

pytestmark = pytest.mark.browser

BANNER = (
    "[Inbox: 1 item(s) resolved]\n"
    '- [restock_watch] Request: "Notify when Yirgacheffe is back in stock" -> Response: '
    '"Back in stock: 12 bags" (resolved 2030-01-01T10:00:00.000Z)'
)
STOCK = {"name": "Ethiopia Yirgacheffe", "in_stock": False, "bags": 0, "price_cents": 1900}


def stock_check(n: int) -> list[dict]:
    call_id = f"call_{n}"
    return [
        {"sender": "user", "text": f"Do you have Yirgacheffe? (asking for the {n}th time)"},
        {
            "sender": "agent",
            "text": "Let me check.",
            "tool_calls": [
                {"id": call_id, "tool_name": "check_stock", "input_args": {"coffee": "Yirga"}}
            ],
        },
        {
            "sender": "user",
            "text": "tool results",
            "tool_results": [
                {
                    "tool_name": "check_stock",
                    "call_id": call_id,
                    "result": {"status": "success", "data": STOCK, "renderData": STOCK},
                }
            ],
        },
        {"sender": "agent", "text": "Ethiopia Yirgacheffe is out of stock right now."},
    ]


@pytest.fixture
def watched_chat(server) -> str:
    headers = {"Authorization": f"Token {server.token_for('demo')}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as api:
        session_id = api.post("/api/sessions", json={"title": "Yirgacheffe"}).json()["sessionId"]
        messages = [message for n in range(4) for message in stock_check(n)]
        messages.append(
            {"sender": "user", "text": "Summary: the customer waits.", "is_compaction": True}
        )
        messages.append({"sender": "user", "text": BANNER, "framework_context": "inbox"})
        messages.append({"sender": "agent", "text": "Good news: the Yirgacheffe is back."})
        answer = api.post(f"/api/sessions/{session_id}/messages", json={"messages": messages})
        assert answer.status_code == 200, answer.text
    return session_id


def test_it_shows_a_session_as_a_transcript_with_its_json_folded(
    server, browser, watched_chat, tmp_path
):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    url = f"/admin/conversations/session/{quote(watched_chat)}/change/"
    log_in(page, server.url, "staff", STAFF_PASSWORD, next_url=url)
    transcript = page.locator(".transcript")
    transcript.wait_for()

    text = " ".join(transcript.inner_text().split())
    # A page to read, not a form: no Save, no Delete, no "Change session".
    controls = (
        page.locator("#content").locator('input[type="submit"], button, a.deletelink').count()
    )
    heading = page.locator("#content h1").inner_text()
    height = page.evaluate("document.documentElement.scrollHeight")
    page.screenshot(path=screenshot_path("admin-session.png", tmp_path), full_page=True)
    raw = transcript.locator(".transcript__raw pre").first
    hidden_before = not raw.is_visible()
    transcript.locator(".transcript__raw summary").first.click()
    shown_after = raw.is_visible() and '"sender": "user"' in raw.inner_text()
    context.close()

    assert controls == 0 and heading == "Yirgacheffe"
    assert "Do you have Yirgacheffe? (asking for the 3th time)" in text
    assert 'check_stock {"coffee": "Yirga"}' in text
    assert "check_stock: success" in text
    assert "Compacted" in text
    assert "Restock watch answered: Back in stock: 12 bags" in text
    assert '"input_args"' not in text  # the JSON is folded away ...
    assert hidden_before and shown_after  # ... one click from view
    # 19 messages: the raw-JSON table made this page about 12,000 px tall.
    assert height < 4000
