"""In Chromium: a customer clicks "Talk to a person", a barista claims the chat on the
console, they exchange messages live both ways, the barista hands back, the agent goes on."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import BARISTA_PASSWORD, DEMO_PASSWORD, screenshot_path
from tests.browser.test_coffee_shop import log_in, say

pytestmark = pytest.mark.browser

WAIT_MS = 30_000


def test_a_barista_takes_the_chat_and_hands_it_back(server, browser, tmp_path):
    expect.set_options(timeout=WAIT_MS)
    customer = browser.new_context(viewport={"width": 1280, "height": 900})
    page = customer.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    say(page, "hello")
    expect(page.locator(".msg--agent").first).to_be_visible()
    page.evaluate("window.stillTheSamePage = true")

    page.get_by_role("button", name="Talk to a person").click()
    expect(page.locator("#handoff")).to_contain_text("This chat waits for a person")

    staff = browser.new_context(viewport={"width": 1280, "height": 900})
    console = staff.new_page()
    log_in(console, server.url, "barista", BARISTA_PASSWORD, next_url="/handoffs/")
    expect(console.locator("#live-state")).to_have_attribute("data-state", "open")
    row = console.locator(".handoffs-row").first
    expect(row).to_contain_text("waiting")
    row.click()
    console.get_by_role("button", name="Claim").click()
    expect(console.locator("#handoffs-detail")).to_contain_text("answers this chat")

    # The customer reads who joined, live.
    expect(page.locator("#handoff")).to_contain_text("answers this chat")
    expect(page.locator("#messages")).to_contain_text("joined the chat")

    console.get_by_label("Reply to the customer").fill("Hi, a barista here. How can I help?")
    console.get_by_role("button", name="Send").click()
    expect(page.locator("#messages")).to_contain_text("Hi, a barista here.")
    page.screenshot(path=screenshot_path("handoff-customer.png", tmp_path))

    say(page, "my latte was cold")
    expect(console.locator("#handoffs-detail")).to_contain_text("my latte was cold")
    console.screenshot(path=screenshot_path("handoff-console.png", tmp_path))

    console.get_by_label("Summary for the agent").fill("Offered a fresh latte.")
    console.get_by_role("button", name="Hand back to the agent").click()
    expect(page.locator("#messages")).to_contain_text("The agent answers again.")
    expect(page.locator("#handoff")).to_contain_text("Talk to a person")

    agent_before = page.locator(".msg--agent:not(.msg--person)").count()
    say(page, "show me the menu")
    # The agent answers again (one message or more: a tool call, then its words).
    expect(page.locator(".msg--agent:not(.msg--person)").nth(agent_before)).to_be_visible()
    assert page.evaluate("window.stillTheSamePage") is True
    staff.close()
    customer.close()
