"""The coffee shop in a real browser: a customer's page changes live when staff act elsewhere."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.browser.conftest import DEMO_PASSWORD, STAFF_PASSWORD, screenshot_path

pytestmark = pytest.mark.browser

WAIT_MS = 20_000
RESTOCK_NEWS = "Yirgacheffe is back: 12 bags arrived this morning."


def log_in(page: Page, base_url: str, username: str, password: str, next_url: str = "/") -> None:
    page.goto(f"{base_url}/accounts/login/?next={next_url}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def open_live_page(
    browser, base_url: str, username: str, password: str, next_url: str, *, height: int = 900
) -> tuple[BrowserContext, Page]:
    """A fresh context logged in on `next_url` once its live socket is open, the page marked
    so that a test can tell it was never reloaded (`window.stillTheSamePage`)."""
    context = browser.new_context(viewport={"width": 1280, "height": height})
    page = context.new_page()
    log_in(page, base_url, username, password, next_url=next_url)
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    page.evaluate("window.stillTheSamePage = true")
    return context, page


def say(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()
    # Shown as sent at once; each step then waits for the agent's answer it expects.
    expect(page.locator("#messages")).to_contain_text(text)


def test_it_shows_a_staff_resolution_live_and_checks_out_in_the_page(server, browser, tmp_path):
    customer = browser.new_context(viewport={"width": 1280, "height": 900})
    page = customer.new_page()
    expect.set_options(timeout=WAIT_MS)

    # The customer logs in, starts a chat and asks for the out-of-stock Yirgacheffe.
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")

    say(page, "Do you have Yirgacheffe?")
    expect(page.locator("#messages")).to_contain_text("out of stock")
    # The chat takes its title from the first message, live, without a reload.
    expect(page.locator(".chat__head h1")).to_have_text("Do you have Yirgacheffe?")
    expect(page).to_have_title("Do you have Yirgacheffe? · glove-django")
    say(page, "yes, notify me when it is back")
    watching = page.locator('[data-section="watching"]')
    expect(watching).to_contain_text("Restock watch")
    # A mark that a reload would wipe: the sidebar must change without one.
    page.evaluate("window.stillTheSamePage = true")

    # Staff resolve the watch in the admin, in a browser context of their own.
    staff = browser.new_context(viewport={"width": 1280, "height": 900})
    admin = staff.new_page()
    log_in(admin, server.url, "staff", STAFF_PASSWORD, next_url="/admin/inbox/inboxitem/")
    # The list links each item by its request (ids are on the item's page).
    admin.locator("#result_list .field-short_request a").first.click()
    admin.get_by_label("Response").fill(RESTOCK_NEWS)
    admin.screenshot(path=screenshot_path("admin.png", tmp_path), full_page=True)
    admin.get_by_role("button", name="Save", exact=True).click()
    expect(admin.locator(".messagelist")).to_contain_text("Resolved")
    staff.close()

    # The customer's sidebar moves the item to Resolved, live.
    expect(page.locator('[data-section="resolved"]')).to_contain_text(RESTOCK_NEWS)
    expect(watching).not_to_contain_text("Restock watch")
    assert page.evaluate("window.stillTheSamePage") is True

    # The next message brings the news into the conversation. Staff answered without
    # restocking, so the agent checks the shelf and promises no bag.
    say(page, "any news?")
    expect(page.locator("#messages")).to_contain_text("Yirgacheffe is not in stock yet")
    expect(page.locator("#messages")).not_to_contain_text("Shall I add a bag")

    # Checking out with the saved card asks permission, then confirmation, both in the page.
    say(page, "add 2 Kenya AA")
    expect(page.locator("#messages")).to_contain_text("Added 2")
    say(page, "checkout")
    page.get_by_role("button", name="Allow once").click()
    expect(page.locator("#slots")).to_contain_text("Confirm your order")
    page.screenshot(path=screenshot_path("chat.png", tmp_path), full_page=True)
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#messages")).to_contain_text(re.compile(r"Order #\d+ is placed"))
    expect(page.locator("#slots")).not_to_contain_text("Confirm your order")
    expect(page.locator("#stream")).to_be_hidden()
    assert page.evaluate("window.stillTheSamePage") is True
    customer.close()
