"""A budget that needs a person: a customer's turn at the cap waits on an approval "raise the
limit"; a barista approves it on /approvals/ and the customer's page goes on live."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import BARISTA_PASSWORD
from tests.browser.test_coffee_shop import log_in, say

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WAIT_MS = 30_000
PASSWORD = "pw-brenda-browser-1"
# A customer of her own, and a budget of one token for her alone (the other browser tests'
# users are not under it): her first call is past it.
SETUP = f"""
from django.contrib.auth import get_user_model
from gloveapp.budgets.models import Budget
get_user_model().objects.create_user("brenda", password="{PASSWORD}")
Budget.objects.create(key="brenda-tokens", name="Brenda's tokens", scope="user",
                      target="brenda", window="day", cap_tokens=1, action="require_person")
"""
TEARDOWN = 'from gloveapp.budgets.models import Budget; Budget.objects.filter(key="brenda-tokens").delete()'


def test_a_barista_raises_the_limit_on_the_approvals_page_and_the_chat_goes_on(server, browser):
    expect.set_options(timeout=WAIT_MS)
    server.manage("shell", "-c", SETUP)
    try:
        customer = browser.new_context(viewport={"width": 1280, "height": 900})
        page = customer.new_page()
        log_in(page, server.url, "brenda", PASSWORD)
        page.get_by_role("button", name="New chat").click()
        expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
        expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
        say(page, "show me the menu")
        slots = page.locator("#slots")
        expect(slots).to_contain_text("Waiting for a staff member to approve your extra spending")
        expect(page.locator("#turn-status")).to_contain_text(
            "Waiting for a staff member to approve"
        )
        page.evaluate("window.stillTheSamePage = true")

        staff = browser.new_context(viewport={"width": 1280, "height": 900})
        approvals = staff.new_page()
        log_in(approvals, server.url, "barista", BARISTA_PASSWORD, next_url="/approvals/?view=all")
        row = approvals.locator("#approvals-list .approvals-row", has_text="brenda")
        expect(row.first).to_contain_text("brenda")
        row.first.click()
        detail = approvals.locator("#approvals-detail")
        expect(detail).to_contain_text("brenda-tokens")
        detail.get_by_role("button", name="Approve", exact=True).click()
        expect(detail).to_contain_text("Approved by barista via page")
        staff.close()

        # The customer's page goes on by itself: the prompt goes, the agent answers.
        expect(slots).not_to_contain_text("extra spending")
        expect(page.locator("#messages .msg--agent .bubble").last).to_be_visible()
        expect(page.locator("#turn-status")).not_to_contain_text(
            "Waiting for a staff member to approve"
        )
        assert page.evaluate("window.stillTheSamePage") is True
        customer.close()
    finally:
        server.manage("shell", "-c", TEARDOWN)
