"""Typed text is never lost, in a real browser: what is typed while a message is sending
stays in the composer, a post that fails puts its text back before it, a reload brings the
draft back; the inbox's reply box sends on Ctrl+Enter and Enter alone breaks the line."""

from __future__ import annotations

import re
import secrets

import pytest
from playwright.sync_api import Route, expect

from tests.browser.test_coffee_shop import log_in
from tests.browser.test_workspace_inbox import push
from tests.inbox.workspaces.conftest import make_workspace

pytestmark = pytest.mark.browser

WAIT_MS = 20_000
POSTS = re.compile(r"/sessions/[^/]+/messages$")


def next_held(page, held: list[Route]) -> Route:
    """The post the route holds (Playwright hands it over while the page is driven)."""
    for _ in range(200):
        if held:
            assert len(held) == 1, held
            return held.pop()
        page.wait_for_timeout(50)
    raise AssertionError("the post never left the page")


def test_the_composer_keeps_what_is_typed_while_sending_and_what_failed_to_send(server, browser):
    expect.set_options(timeout=WAIT_MS)
    password = secrets.token_urlsafe(12)
    server.add_user("typist", password)
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    log_in(page, server.url, "typist", password)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")

    # Hold each post in flight until the test lets it go.
    held: list[Route] = []
    page.route(POSTS, lambda route: held.append(route))
    composer = page.get_by_label("Message")

    composer.fill("What beans do you have?")
    composer.press("Enter")
    expect(composer).to_have_value("")  # it left the field when it was sent
    composer.press_sequentially("and decaf")  # typed while the first is in flight
    next_held(page, held).continue_()
    expect(page.locator("#messages")).to_contain_text("What beans do you have?")
    expect(composer).to_have_value("and decaf")

    # A post the server refuses: its text comes back, before what was typed meanwhile.
    composer.fill("One flat white")
    page.get_by_role("button", name="Send").click()
    expect(composer).to_have_value("")
    composer.press_sequentially("to go")
    next_held(page, held).fulfill(status=503, body="busy")
    expect(composer).to_have_value("One flat white\nto go")

    # The draft outlives a reload (a live resync, a reconnect).
    page.unroute(POSTS)
    page.reload()
    expect(page.get_by_label("Message")).to_have_value("One flat white\nto go")
    context.close()


def test_the_inbox_reply_sends_on_ctrl_enter_and_enter_breaks_the_line(
    server, browser, tmp_path_factory
):
    expect.set_options(timeout=WAIT_MS)
    password = secrets.token_urlsafe(12)
    server.add_user("keyboardist", password)
    workspace = make_workspace(
        server, tmp_path_factory.mktemp("keys-workspace"), "keyboardist", owner_token=""
    )
    question = push(workspace, comments="Which index should I use?")
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    log_in(page, server.url, "keyboardist", password, next_url=f"/inbox/?entry={question}")
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")

    reply = page.get_by_label(re.compile("^Reply in "))
    expect(page.locator(".reply-bar")).to_contain_text("Ctrl+Enter")  # it says so
    reply.press_sequentially("A B-tree")
    reply.press("Enter")
    reply.press_sequentially("on (owner, ts).")
    expect(reply).to_have_value("A B-tree\non (owner, ts).")  # Enter did not send
    reply.press("Control+Enter")
    thread = page.locator(".thread")
    expect(thread).to_contain_text("on (owner, ts).")
    expect(thread).to_contain_text("waiting for the workspace's agent")
    expect(reply).to_have_value("")
    context.close()
