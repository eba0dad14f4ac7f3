"""What a new customer tripped over, in a real browser (issue 23): queued messages stay
listed, a stopped checkout says it was stopped, and "Don't allow" asks again next time."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import DEMO_PASSWORD, STAFF_PASSWORD
from tests.browser.test_coffee_shop import log_in, say
from tests.browser.test_workspace_inbox import push
from tests.examples.test_mcp_client_example import EXAMPLE
from tests.inbox.workspaces.conftest import make_workspace

pytestmark = pytest.mark.browser

WAIT_MS = 20_000


def new_chat(browser, server) -> tuple[object, Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    expect.set_options(timeout=WAIT_MS)
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    return context, page


def waiting_on_checkout(page: Page) -> None:
    say(page, "add 2 Kenya AA")
    expect(page.locator("#messages")).to_contain_text("Added 2")
    say(page, "checkout")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()


def send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_it_lists_three_queued_messages_before_and_after_a_reload(server, browser):
    context, page = new_chat(browser, server)
    waiting_on_checkout(page)

    for text in ("a flat white", "and a croissant", "make it two"):
        send(page, text)
        expect(page.locator(".queue")).to_contain_text(text)
    queued = page.locator('.queue [data-state="queued"] .bubble')
    expect(queued).to_have_text(["a flat white", "and a croissant", "make it two"])

    page.reload()
    expect(queued).to_have_text(["a flat white", "and a croissant", "make it two"])
    # The started message (running, or parked on its prompt past
    # GLOVE_TURN_PARK_AFTER_SECONDS) is shown once, in the history, not again in the queue.
    ahead = page.locator('.queue [data-state="running"], .queue [data-state="waiting"]')
    expect(ahead).to_have_count(0)
    expect(page.locator(".bubble", has_text=re.compile(r"^checkout$"))).to_have_count(1)

    # One is withdrawn before it runs; the others stay, in order.
    page.locator('.queue [data-state="queued"]').nth(1).get_by_role(
        "button", name="Withdraw"
    ).click()
    expect(queued).to_have_text(["a flat white", "make it two"])
    page.get_by_role("button", name="Stop").click()
    context.close()


def test_it_shows_a_stopped_checkout_as_stopped(server, browser):
    context, page = new_chat(browser, server)
    waiting_on_checkout(page)

    page.get_by_role("button", name="Stop").click()

    card = page.locator('[data-tool="checkout"]')
    expect(card).to_have_attribute("data-status", "stopped")
    expect(card).to_contain_text("stopped")
    expect(page.locator(".note--turn")).to_contain_text(re.compile(r"Stopped by demo at \d{4}-"))
    page.reload()
    expect(card).to_have_attribute("data-status", "stopped")
    expect(page.locator("#messages")).not_to_contain_text("running…")
    context.close()


def test_it_asks_again_after_dont_allow(server, browser):
    context, page = new_chat(browser, server)
    waiting_on_checkout(page)

    page.get_by_role("button", name="Don't allow").click()
    expect(page.locator("#slots")).not_to_contain_text("Allow")
    expect(page.locator("#turn-status")).not_to_contain_text("working")
    expect(page.locator("#permissions")).to_contain_text("None")

    say(page, "checkout")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    page.locator(".slot-card__more summary").click()
    page.get_by_role("button", name="Never allow in this chat").click()
    expect(page.locator("#permissions")).to_contain_text("Always denied")
    page.get_by_role("button", name="Reset checkout").click()
    expect(page.locator("#permissions")).not_to_contain_text("Always denied")
    context.close()


REPLIER_PASSWORD = "replier-browser-pw-1"


def test_a_reply_from_the_inbox_is_read_by_the_workspaces_mcp_client(
    server, browser, tmp_path_factory
):
    # A user of its own: the demo user's inbox is another test's to count.
    server.add_user("replier", REPLIER_PASSWORD)
    root = tmp_path_factory.mktemp("reply-workspace")
    workspace = make_workspace(server, root, "replier", owner_token="")
    question = push(workspace, comments="Blocked: which index should I use?")
    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    log_in(page, server.url, "replier", REPLIER_PASSWORD, next_url=f"/inbox/?entry={question}")
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")

    page.get_by_label(re.compile("^Reply in ")).fill("Use a B-tree on (owner, ts).")
    page.get_by_role("button", name="Reply").click()
    thread = page.locator(".thread")
    expect(thread).to_contain_text("Use a B-tree on (owner, ts).")
    expect(thread).to_contain_text("waiting for the workspace's agent")

    # The workspace's agent, the MCP SDK's client (examples/mcp_client.py), reads it once.
    read = subprocess.run(
        [sys.executable, str(EXAMPLE), workspace.mcp_url, workspace.token],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert read.returncode == 0, read.stderr
    replies = json.loads(read.stdout)["replies"]
    assert [(r["entryId"], r["text"]) for r in replies] == [
        (question, "Use a B-tree on (owner, ts).")
    ]
    # ... and the page says so, live.
    expect(thread).to_contain_text("read by the workspace's agent")
    context.close()


MESH_ANSWER = """
from django.contrib.auth import get_user_model
from gloveapp.conversations.models import Session
from gloveapp.core.types import InboxItem
from inbox.services import inbox_item_add, inbox_item_update
session = Session.objects.get(owner__username="demo", key="{key}")
message_id = "msg_chat-glove_5f1e0c2a9b_1764100000000_ab12cd"
inbox_item_add(session_id=session.pk, item=InboxItem(
    id="inbox_{key}_w", tag="mesh:waiting:" + message_id,
    request='Waiting for response from "Roastery" (roastery) to message ' + message_id,
    status="pending", blocking=True))
inbox_item_add(session_id=session.pk, item=InboxItem(
    id="inbox_{key}_r", tag="mesh:from:roastery",
    request='Message from "Roastery" (roastery) [message id: msg_r_1] (replying to '
    + message_id + ")",
    response="We have 12 bags of Kenya AA.", status="resolved"))
inbox_item_update(session_id=session.pk, item_id="inbox_{key}_w",
    updates={{"status": "resolved", "response": "We have 12 bags of Kenya AA."}})
"""


def test_it_shows_one_card_per_mesh_answer_naming_the_agent(server, browser):
    context, page = new_chat(browser, server)
    key = page.url.rstrip("/").rsplit("/", 1)[1]

    server.manage("shell", "-c", MESH_ANSWER.format(key=key))

    inbox = page.locator("#inbox")
    expect(inbox.locator('[data-section="resolved"] .inbox-item')).to_have_count(1)
    expect(inbox).to_contain_text("Roastery answered")
    expect(inbox).to_contain_text("We have 12 bags of Kenya AA.")
    expect(inbox).not_to_contain_text("mesh:")
    expect(inbox).not_to_contain_text("msg_")
    box = inbox.locator(".inbox-item").first.bounding_box()
    side = page.locator(".chat__side").bounding_box()
    assert box and side and box["x"] + box["width"] <= side["x"] + side["width"] + 1
    context.close()


@pytest.fixture
def mesh_traffic(server) -> None:
    headers = {"Authorization": f"Token {server.token_for('demo')}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as api:
        session_id = api.post(
            "/api/sessions", json={"title": "A chat whose title runs on and on " * 4}
        ).json()["sessionId"]
        for n in range(6):
            message_id = f"msg_chat-glove_{secrets.token_hex(16)}_{1764100000000 + n}_{n:06x}"
            item = {
                "id": f"inbox_{secrets.token_hex(12)}",
                "tag": f"mesh:waiting:{message_id}",
                "request": f'Waiting for response from "Roastery" (roastery) to {message_id}',
                "blocking": True,
            }
            answer = api.post(f"/api/sessions/{session_id}/inbox", json={"item": item})
            assert answer.status_code in (200, 201), answer.text


def test_the_admin_inbox_list_fits_1280_px_with_mesh_tags(server, browser, mesh_traffic):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    log_in(page, server.url, "staff", STAFF_PASSWORD, next_url="/admin/inbox/inboxitem/")
    page.wait_for_selector("#result_list")

    assert page.locator(".results").evaluate("el => el.scrollWidth - el.clientWidth") <= 0
    for column in ("state", "short_session", "asked"):
        header = page.locator(f"#result_list thead th.column-{column}")
        box = header.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280, column
    tag = page.locator("#result_list td.field-short_tag span").first
    assert tag.get_attribute("title").startswith("mesh:waiting:msg_chat-glove_")
    assert tag.inner_text().endswith("…")
    kinds = page.locator("#changelist-filter").inner_text()
    for kind in ("plain", "mesh direct", "mesh broadcast", "mesh waiting", "expired"):
        assert kind in kinds
    assert "By tag" not in kinds and "msg_chat-glove_" not in kinds
    page.locator("#changelist-filter").get_by_role("link", name="mesh waiting").click()
    expect(page.locator("#result_list tbody tr").first).to_contain_text("Pending")

    page.goto(f"{server.url}/admin/conversations/session/")
    results = page.locator(".results")
    assert results.evaluate("el => el.scrollWidth - el.clientWidth") <= 0
    last = page.locator("#result_list thead th").last.bounding_box()
    assert last is not None and last["x"] + last["width"] <= 1280
    context.close()
