"""A long chat in a real browser: it opens at the newest message, the sidebar stays in view,
and the inbox's banner reads as an answer, with the raw text one click away."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.browser.conftest import DEMO_PASSWORD, screenshot_path, wait_until
from tests.browser.test_coffee_shop import log_in

pytestmark = pytest.mark.browser

BANNER = (
    "[Inbox: 1 item(s) resolved]\n"
    '- [restock_watch] Request: "Notify when Yirgacheffe is back" -> Response: '
    '"Back in stock: 12 bags" (resolved 2030-01-01T10:00:00.000Z)'
)


@pytest.fixture
def long_chat(server) -> str:
    token = server.token_for("demo")
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as api:
        session_id = api.post("/api/sessions", json={"title": "A long morning"}).json()["sessionId"]
        messages = []
        for n in range(30):
            messages.append({"sender": "user", "text": f"Question number {n}?"})
            messages.append({"sender": "agent", "text": f"Answer number {n}.\n" * 3})
        messages.append({"sender": "user", "text": BANNER, "framework_context": "inbox"})
        messages.append({"sender": "agent", "text": "Good news: the Yirgacheffe is back."})
        answer = api.post(f"/api/sessions/{session_id}/messages", json={"messages": messages})
        assert answer.status_code == 200, answer.text
    return session_id


def test_it_opens_a_long_chat_at_its_newest_message(server, browser, long_chat, tmp_path):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD, next_url=f"/sessions/{long_chat}/")
    page.wait_for_selector("#messages .timeline")
    wait_until(page, "window.scrollY > 0")

    newest = page.locator("#messages .timeline > li").last
    assert "the Yirgacheffe is back" in newest.inner_text()
    assert newest.is_visible()
    box = newest.bounding_box()
    assert box is not None and box["y"] < 800  # in the viewport, not below it

    side = page.locator(".chat__side").bounding_box()
    assert side is not None and -1 <= side["y"] < 800  # sticky: still in view

    page.screenshot(path=screenshot_path("chat-long.png", tmp_path))
    banner = page.locator('[data-context="inbox"]')
    assert "Restock watch answered: Back in stock: 12 bags" in " ".join(
        banner.locator(".note__answers").inner_text().split()
    )
    assert not banner.locator(".note__raw .note__text").is_visible()
    banner.locator(".note__raw summary").click()
    assert "[Inbox: 1 item(s) resolved]" in banner.locator(".note__raw .note__text").inner_text()
    context.close()


def scroll_to_the_top_until_attached(page, locator, attempts=30):
    """Scroll to the top as a reader does, again if nothing came: htmx checks "revealed" on
    scroll events, and a scroll to where the page already is fires none (under load the first
    one can land before the page settled at its bottom). Each wait is a second longer than
    the last, up to five: on a busy machine the page's answer can take longer than a second,
    and scrolling again before it lands only asks again."""
    for attempt in range(attempts):
        page.evaluate("window.scrollTo(0, 400)")
        page.mouse.wheel(0, -5000)
        # (Locators, not wait_for_function: the page's CSP forbids evaluating strings.)
        try:
            locator.wait_for(state="attached", timeout=1000 * min(attempt + 1, 5))
            return
        except PlaywrightTimeoutError:
            continue
    locator.wait_for(state="attached", timeout=10_000)


def test_it_loads_earlier_pages_on_scroll_and_keeps_them_through_a_refresh(server, browser):
    from gloveapp.pages.context import HISTORY_PAGE

    token = server.token_for("demo")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=10
    ) as api:
        session_id = api.post("/api/sessions", json={"title": "A very long day"}).json()[
            "sessionId"
        ]
        messages = [
            {"sender": "user" if n % 2 == 0 else "agent", "text": f"Line {n}."}
            for n in range(3 * HISTORY_PAGE)
        ]
        assert (
            api.post(
                f"/api/sessions/{session_id}/messages", json={"messages": messages}
            ).status_code
            == 200
        )
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        log_in(page, server.url, "demo", DEMO_PASSWORD, next_url=f"/sessions/{session_id}/")
        page.wait_for_selector("#messages .timeline")
        shown = "document.querySelectorAll('#messages li.msg').length"
        assert page.evaluate(shown) == HISTORY_PAGE

        # Scrolling to the top reveals the "earlier" row, which loads the page before it.
        for _ in range(10):
            if page.evaluate(shown) == 3 * HISTORY_PAGE:
                break
            before = page.evaluate(shown)
            scroll_to_the_top_until_attached(page, page.locator("#messages li.msg").nth(before))
        assert page.evaluate(shown) == 3 * HISTORY_PAGE
        assert page.locator("#messages li.msg").first.inner_text().strip() == "Line 0."

        # A live refresh (a message appended elsewhere) keeps the earlier pages loaded.
        api.post(
            f"/api/sessions/{session_id}/messages",
            json={"messages": [{"sender": "agent", "text": "One more line."}]},
        )
        page.locator("#messages li.msg", has_text="One more line.").wait_for()
        assert page.evaluate(shown) == 3 * HISTORY_PAGE + 1
        context.close()
