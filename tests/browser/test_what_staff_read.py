"""What staff and account owners read, in a real browser: API tokens created and revoked from
the page (the key shown once), and the admin's Mesh traffic list with every column on screen
at 1280 px."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DEMO_PASSWORD, STAFF_PASSWORD, screenshot_path
from tests.browser.test_coffee_shop import log_in

pytestmark = pytest.mark.browser

WAIT_MS = 20_000

MESH_TRAFFIC = """
from gloveapp.conversations.services import session_create
from gloveapp.core.types import InboxItem
from django.contrib.auth import get_user_model
from inbox.services import inbox_item_add, inbox_item_resolve
owner = get_user_model().objects.get(username="staff")
session = session_create(owner=owner, title="Roastery peer")
long = "Ask the roastery whether 40 bags of Colombia Huila can be roasted by Friday " * 3
for n, tag in enumerate(["mesh:from:roastery-agent-with-a-long-name", "mesh:waiting:m-1"]):
    item = inbox_item_add(
        session_id=session.pk,
        item=InboxItem(id=f"inbox_mesh_{n}_" + "x" * 40, tag=tag, request=long),
    )
    inbox_item_resolve(item_id=item.pk, response=long)
print("ok")
"""


def test_an_account_owner_creates_and_revokes_an_api_token_on_the_page(server, browser, tmp_path):
    expect.set_options(timeout=WAIT_MS)
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 800})
        page = context.new_page()
        log_in(page, server.url, "demo", DEMO_PASSWORD, next_url="/accounts/tokens/")
        expect(page.get_by_role("heading", name="API tokens")).to_be_visible()
        expect(page.locator("main")).not_to_contain_text("create_api_token")
        page.get_by_role(
            "button", name=re.compile(r"Create a token|Replace with a new token")
        ).click()
        key = page.get_by_label("New API token").input_value()
        assert re.fullmatch(r"[0-9a-f]{40}", key), key
        expect(page.locator("main")).to_contain_text("shown only this once")
        page.screenshot(path=screenshot_path(f"tokens-created-{width}.png", tmp_path))
        with httpx.Client(base_url=server.url, timeout=10) as api:
            opens = api.get("/api/sessions", headers={"Authorization": f"Token {key}"})
            assert opens.status_code == 200
            # Shown once: a reload lists it by its start only.
            page.goto(f"{server.url}/accounts/tokens/")
            expect(page.locator(".token-list")).to_contain_text(key[:6])
            assert key not in page.content()
            page.get_by_role("button", name="Revoke").click()
            expect(page.locator("main")).to_contain_text("The token was revoked")
            expect(page.locator("main")).to_contain_text("You have no API token.")
            gone = api.get("/api/sessions", headers={"Authorization": f"Token {key}"})
            assert gone.status_code == 401
        context.close()


def test_the_mesh_traffic_list_shows_every_column_at_1280_px(server, browser, tmp_path):
    expect.set_options(timeout=WAIT_MS)
    assert "ok" in server.manage("shell", "-c", MESH_TRAFFIC)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    log_in(page, server.url, "staff", STAFF_PASSWORD, next_url="/admin/mesh/meshtraffic/")
    table = page.locator("#result_list")
    expect(table).to_be_visible()
    headers = table.locator("thead th")
    expect(headers).to_have_count(7)  # read-only: no action checkbox
    page.screenshot(path=screenshot_path("mesh-traffic-1280.png", tmp_path), full_page=True)
    # Every column's header lies inside the list's box: none cut off or scrolled away.
    results = page.locator("#changelist .results").bounding_box()
    for index in range(7):
        box = headers.nth(index).bounding_box()
        assert box is not None and box["x"] + box["width"] <= results["x"] + results["width"] + 1, (
            headers.nth(index).inner_text(),
            box,
            results,
        )
    assert page.evaluate(
        "(() => { const r = document.querySelector('#changelist .results');"
        " return r.scrollWidth <= r.clientWidth; })()"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    context.close()
