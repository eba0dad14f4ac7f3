"""A barista approves a large order on /approvals/ with another quantity; the customer's page
goes on live with the edited order."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import BARISTA_PASSWORD, DEMO_PASSWORD
from tests.browser.test_coffee_shop import log_in, say

pytestmark = pytest.mark.browser

WAIT_MS = 30_000


def test_a_barista_edits_the_quantity_and_approves_and_the_customer_goes_on_live(server, browser):
    expect.set_options(timeout=WAIT_MS)
    customer = browser.new_context(viewport={"width": 1280, "height": 900})
    page = customer.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    say(page, "add 6 Colombia")
    expect(page.locator("#messages")).to_contain_text("Added 6")
    say(page, "checkout, pay at pickup")
    expect(page.locator("#slots")).to_contain_text("Waiting for a staff member to approve")
    page.evaluate("window.stillTheSamePage = true")

    staff = browser.new_context(viewport={"width": 1280, "height": 900})
    approvals = staff.new_page()
    log_in(approvals, server.url, "barista", BARISTA_PASSWORD, next_url="/approvals/?view=groups")
    expect(approvals.locator("#approvals-list")).to_contain_text("checkout")
    approvals.locator("#approvals-list .approvals-row").first.click()
    quantity = approvals.get_by_label("Colombia Huila · quantity")
    expect(quantity).to_have_value("6")
    quantity.fill("4")
    approvals.get_by_role("button", name="Approve").click()
    expect(approvals.locator("#approvals-detail")).to_contain_text("edit by barista via page")
    staff.close()

    # The customer's page goes on by itself: the confirmation shows the edited order.
    slots = page.locator("#slots")
    expect(slots).to_contain_text("Confirm your order")
    expect(slots).to_contain_text("4 \u00d7 Colombia Huila")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#messages")).to_contain_text(re.compile(r"Order #\d+ is placed"))
    assert page.evaluate("window.stillTheSamePage") is True
    customer.close()
