"""A barista approves a large order on /approvals/ with another quantity; the customer's page
goes on live with the edited order. The keyboard moves through the queue, and the list and
the open request follow changes live."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import BARISTA_PASSWORD, DEMO_PASSWORD, screenshot_path
from tests.browser.test_coffee_shop import log_in, open_live_page, say

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
SELECTED = re.compile(r"\bis-selected\b")


SUMMARY = "Checkout: 6 \u00d7 Colombia Huila, $96.00, pay at pickup"
# What a customer must never read: JSON, the tools' internal names, a running badge.
INTERNAL = re.compile(r"[{}]|toolName|glove_|add_to_cart|view_cart|running\u2026")


@pytest.mark.parametrize("width,height", [(1280, 900), (390, 844)], ids=["1280px", "390px"])
def test_a_barista_edits_the_quantity_and_approves_and_the_customer_reads_what_changed(
    server, browser, tmp_path, width, height
):
    expect.set_options(timeout=WAIT_MS)
    customer = browser.new_context(viewport={"width": width, "height": height})
    page = customer.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    say(page, "add 6 Colombia")
    expect(page.locator("#messages")).to_contain_text("Added 6")
    say(page, "checkout, pay at pickup")

    # The customer reads what waits, in words: the summary, no JSON, no internal name.
    slots = page.locator("#slots")
    expect(slots).to_contain_text("Waiting for a staff member to approve your checkout")
    expect(slots).to_contain_text(SUMMARY)
    expect(page.locator('[data-tool="checkout"] .tool-card__name')).to_have_text("Checkout")
    assert not INTERNAL.search(slots.inner_text()), slots.inner_text()
    assert not INTERNAL.search(page.locator("#messages").inner_text())
    # One bubble per message: the waiting turn's message is not repeated in the queue.
    expect(page.locator(".bubble", has_text="checkout, pay at pickup")).to_have_count(1)
    page.screenshot(path=screenshot_path(f"approval-waiting-{width}.png", tmp_path))
    page.evaluate("window.stillTheSamePage = true")
    # Past GLOVE_TURN_PARK_AFTER_SECONDS the turn is parked (no worker holds it): the page
    # says so live, and keeps its Stop button.
    expect(page.locator("#turn-status")).to_contain_text(
        "Waiting for a staff member to approve your checkout"
    )
    expect(page.locator('#turn-status [data-action="stop"]')).to_be_visible()

    staff = browser.new_context(viewport={"width": width, "height": height})
    approvals = staff.new_page()
    log_in(approvals, server.url, "barista", BARISTA_PASSWORD, next_url="/approvals/?view=groups")
    # The row says who asks, what and for how much.
    row = approvals.locator("#approvals-list .approvals-row", has_text=SUMMARY).first
    expect(row).to_contain_text("demo")
    expect(row.locator(".approvals-row__total")).to_have_text("$96.00")
    approvals.screenshot(path=screenshot_path(f"approvals-row-{width}.png", tmp_path))
    # Nothing runs off the side of a phone: the top bar and the queue fit the width.
    for each in (page, approvals):
        assert each.evaluate("document.documentElement.scrollWidth") <= width, each.url
    row.click()
    detail = approvals.locator("#approvals-detail")
    expect(detail.locator(".approval__customer")).to_have_text("demo")
    expect(detail.locator(".approval__total")).to_have_text("$96.00")
    # Typed widgets: the payment and the coffee are choices, the quantity a bounded number.
    payment = detail.locator('select[name="arg__payment"]')
    expect(payment).to_have_value("pickup")
    expect(payment.locator("option")).to_have_count(2)
    expect(detail.locator('select[name="arg__lines.0.coffee"]')).to_have_value("Colombia Huila")
    quantity = approvals.get_by_label("Colombia Huila · quantity")
    expect(quantity).to_have_value("6")
    expect(quantity).to_have_attribute("min", "1")
    expect(quantity).to_have_attribute("max", "99")
    # The change shows as a diff before approving.
    quantity.fill("4")
    diff = detail.locator("[data-diff]")
    expect(diff).to_be_visible()
    expect(diff).to_contain_text("Colombia Huila · quantity: 6 \u2192 4")
    approvals.screenshot(path=screenshot_path(f"approvals-diff-{width}.png", tmp_path))
    approvals.get_by_role("button", name="Approve with changes").click()
    expect(detail).to_contain_text("Approved with changes by barista via page")
    # The record shows what was approved and charged, not the total first asked.
    expect(detail.locator(".approval__total")).to_have_text("$64.00")
    expect(detail.locator(".approval__approved")).to_contain_text("4 \u00d7 Colombia Huila, $64.00")
    # ... and in the audit, with a human time (no ISO, no microseconds).
    expect(detail.locator(".approval__audit")).to_contain_text("6 \u2192 4")
    decided = detail.locator(".approval__decision time")
    expect(decided).to_be_visible()
    assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d+|T\d{2}:", decided.inner_text())
    approvals.screenshot(path=screenshot_path(f"approvals-decided-{width}.png", tmp_path))
    staff.close()

    # The customer's page goes on by itself and says what the barista changed.
    expect(page.locator("#messages")).to_contain_text(
        "A barista changed the quantity of Colombia Huila from 6 to 4."
    )
    expect(slots).to_contain_text("Confirm your order")
    expect(slots).to_contain_text("4 \u00d7 Colombia Huila")
    page.screenshot(path=screenshot_path(f"approval-edited-{width}.png", tmp_path))
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#messages")).to_contain_text(re.compile(r"Order #\d+ is placed"))
    assert page.evaluate("window.stillTheSamePage") is True
    customer.close()


# Requests as the demo shop's checkout opens them, straight from the services (no turn waits
# on them): their ids, each on a line of its own after "opened".
OPEN_REQUESTS = """
from gloveapp.approvals.services import approval_open
from gloveapp.core.approvals.policy import approval_prompt
from gloveapp.demo.coffee import LARGE_ORDER, checkout
for bags in {bags}:
    order = {{"payment": "pickup", "lines": [{{"coffee": "Kenya AA", "quantity": bags}}]}}
    prompt = approval_prompt(checkout, order, LARGE_ORDER)
    print("opened", approval_open(session_id="{session_id}", prompt=prompt).pk)
"""
APPROVE = """
from gloveapp.approvals.models import ApprovalRequest
from gloveapp.approvals.services import approval_decide
from gloveapp.core.approvals.decisions import Decision
row = ApprovalRequest.objects.get(pk="{request_id}")
approval_decide(request_id=row.pk, decision=Decision("approve", row.fingerprint), channel="python")
"""


def open_requests(server, session_id: str, *bags: int) -> list[str]:
    out = server.manage("shell", "-c", OPEN_REQUESTS.format(bags=list(bags), session_id=session_id))
    return re.findall(r"^opened (\S+)$", out, re.MULTILINE)


def test_the_keyboard_moves_through_the_queue_and_the_list_follows_live(server, browser):
    expect.set_options(timeout=WAIT_MS)
    headers = {"Authorization": f"Token {server.token_for('demo')}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as api:
        session_id = api.post("/api/sessions", json={"title": "Wholesale"}).json()["sessionId"]
    open_requests(server, session_id, 7, 8)
    context, page = open_live_page(
        browser, server.url, "barista", BARISTA_PASSWORD, "/approvals/?view=groups"
    )
    rows = page.locator("#approvals-list .approvals-row")
    expect(rows).not_to_have_count(0)
    first, second = rows.nth(0).get_attribute("data-id"), rows.nth(1).get_attribute("data-id")

    def row(request_id):
        return page.locator(f'.approvals-row[data-id="{request_id}"]')

    shown = page.locator("#approvals-detail .approval")

    # j opens the first request, j the next, k back; Enter opens the focused row.
    page.keyboard.press("j")
    expect(shown).to_have_attribute("data-id", first)
    expect(row(first)).to_have_class(SELECTED)
    page.keyboard.press("j")
    expect(shown).to_have_attribute("data-id", second)
    expect(page).to_have_url(re.compile(rf"view=groups&request={second}$"))
    page.keyboard.press("k")
    expect(shown).to_have_attribute("data-id", first)
    row(second).locator(".inbox-row__link").focus()
    page.keyboard.press("Enter")
    expect(shown).to_have_attribute("data-id", second)
    expect(row(second)).to_have_class(SELECTED)

    # A request opened meanwhile joins the list; the open one, decided elsewhere, updates in
    # place and leaves the open queue.
    (new,) = open_requests(server, session_id, 9)
    expect(row(new)).to_be_visible()
    expect(row(second)).to_have_class(SELECTED)
    server.manage("shell", "-c", APPROVE.format(request_id=second))
    expect(shown).to_have_attribute("data-status", "decided")
    expect(row(second)).to_have_count(0)
    assert page.evaluate("window.stillTheSamePage") is True
    context.close()
