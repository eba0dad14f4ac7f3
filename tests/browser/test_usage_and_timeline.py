"""The turn timeline and the usage page's charts in Chromium, offline: a customer's chat turn
becomes a waterfall on its admin page and bars on the usage page, drawn by the vendored
Chart.js; any request that leaves the server is refused (and would fail the test)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DEMO_PASSWORD, STAFF_PASSWORD
from tests.browser.test_coffee_shop import log_in, say

pytestmark = pytest.mark.browser

WAIT_MS = 30_000


def offline_context(browser, server_url: str, left: list[str]):
    """A browser context that may reach the test server only: any other address is
    refused and noted in `left`."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})

    def guard(route) -> None:
        if route.request.url.startswith(server_url):
            route.continue_()
        else:
            left.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    return context


def test_staff_read_a_turns_waterfall_and_the_usage_charts_offline(server, browser):
    expect.set_options(timeout=WAIT_MS)
    left: list[str] = []
    customer = offline_context(browser, server.url, left)
    page = customer.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    say(page, "show me the menu")
    expect(page.locator("#messages")).to_contain_text("Espresso")
    session_key = page.url.rstrip("/").rsplit("/", 1)[-1]
    customer.close()

    staff = offline_context(browser, server.url, left)
    admin = staff.new_page()
    log_in(admin, server.url, "staff", STAFF_PASSWORD, next_url="/admin/conversations/session/")
    admin.locator("#result_list a", has_text="show me the menu").first.click()
    timeline = admin.locator("[data-timeline] .timeline__turn").first
    expect(timeline).to_be_visible()
    kinds = timeline.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
    bars = timeline.locator("rect.timeline__bar")
    widths = bars.evaluate_all("rs => rs.map(r => r.getBoundingClientRect().width)")

    server.manage("usage_rollup")  # what the worker's scheduler does every few minutes
    admin.goto(f"{server.url}/admin/usage/")
    turns_chart = admin.locator('[data-chart="turns"]')
    expect(turns_chart).to_have_attribute("data-drawn", re.compile(r"[1-9]"))
    for key in ("duration", "tokens", "cost", "queue"):
        expect(admin.locator(f'[data-chart="{key}"]')).to_have_attribute(
            "data-drawn", re.compile(r"[0-9]")
        )
    # Chart.js drew something: the canvas is not blank.
    painted = admin.evaluate(
        """() => {
            const canvas = document.getElementById("chart-turns");
            const pixels = canvas.getContext("2d").getImageData(
                0, 0, canvas.width, canvas.height).data;
            let inked = 0;
            for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) inked++;
            return inked;
        }"""
    )
    staff.close()

    assert session_key
    assert kinds[:2] in (["queued", "attempt"], ["attempt", "model"]), kinds
    assert kinds.count("model") == 2 and kinds.count("tool") == 1, kinds
    assert all(width > 0 for width in widths)
    assert painted > 500
    assert left == [], f"the pages reached outside the server: {left}"
