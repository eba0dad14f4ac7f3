"""The admin's inbox list fits a laptop screen: no column cut off at 1280-1440 px."""

from __future__ import annotations

import secrets

import httpx
import pytest

from tests.browser.conftest import STAFF_PASSWORD, screenshot_path
from tests.browser.test_coffee_shop import log_in

pytestmark = pytest.mark.browser


@pytest.fixture
def waiting_items(server) -> None:
    headers = {"Authorization": f"Token {server.token_for('demo')}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as api:
        session_id = api.post("/api/sessions", json={"title": "Watching"}).json()["sessionId"]
        for n in range(3):
            item = {
                "id": f"inbox_{n}_{secrets.token_hex(12)}",
                "tag": "restock_watch",
                "request": "Notify the customer when Ethiopia Yirgacheffe is back in stock " * 2,
            }
            answer = api.post(f"/api/sessions/{session_id}/inbox", json={"item": item})
            assert answer.status_code in (200, 201), answer.text


@pytest.mark.parametrize("width", [1280, 1440])
def test_it_shows_every_inbox_column_without_cutting_one_off(
    server, browser, waiting_items, width, tmp_path
):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    log_in(page, server.url, "staff", STAFF_PASSWORD, next_url="/admin/inbox/inboxitem/")
    page.wait_for_selector("#result_list")

    results = page.locator(".results")
    overflow = results.evaluate("el => el.scrollWidth - el.clientWidth")
    last_header = page.locator("#result_list thead th").last.bounding_box()
    page.screenshot(path=screenshot_path(f"admin-inbox-{width}.png", tmp_path))
    context.close()

    assert overflow <= 0
    assert last_header is not None and last_header["x"] + last_header["width"] <= width
