"""The JSON API from a real browser: a same-origin page logged in by the Django session calls
`/api/chat` and the store routes with nothing but `Content-Type: application/json`; a page on
another origin cannot, with or without CORS mode."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.api.liveserver import free_port
from tests.browser.conftest import DEMO_PASSWORD
from tests.browser.test_coffee_shop import log_in

pytestmark = pytest.mark.browser

# What the example's RemoteStoreActions and glove-react's endpoint model send: plain fetch,
# one header, the cookie going along by itself.
CALL_JS = """
async ([base, method, path, body, mode]) => {
  const init = {method, credentials: "include", headers: {"Content-Type": "application/json"}};
  if (mode) init.mode = mode;
  if (body !== null) init.body = JSON.stringify(body);
  try {
    const response = await fetch(base + path, init);
    return {status: response.status, type: response.type, body: await response.text()};
  } catch (error) {
    return {status: 0, error: String(error)};
  }
}
"""


@pytest.fixture(scope="module")
def other_origin(tmp_path_factory) -> Iterator[str]:
    """A second web server on another port: another origin (same site, as a subdomain is)."""
    root = tmp_path_factory.mktemp("other-origin")
    Path(root, "index.html").write_text("<!doctype html><title>elsewhere</title><p>elsewhere")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def logged_in(server, browser) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    page.wait_for_url(f"{server.url}/**")
    yield page
    context.close()


def call(page: Page, base: str, method: str, path: str, body=None, mode=None) -> dict:
    return page.evaluate(CALL_JS, [base, method, path, body, mode])


def test_it_serves_same_origin_json_calls_with_only_a_content_type(server, logged_in):
    page = logged_in
    created = call(page, "", "POST", "/api/sessions", {"title": "browser"})
    assert created["status"] == 201, created
    sid = json.loads(created["body"])["sessionId"]
    at = f"/api/sessions/{sid}"
    item = {"id": f"inbox_browser_{sid}", "tag": "restock_watch", "request": "Watch AA"}
    calls = [
        ("POST", f"{at}/messages", {"messages": [{"sender": "user", "text": "hi"}]}),
        ("GET", f"{at}/messages", None),
        ("POST", f"{at}/tokens", {"tokens_in": 1, "tokens_out": 1}),
        ("POST", f"{at}/turns", None),
        ("POST", f"{at}/reset-counters", None),
        ("PUT", f"{at}/tasks", {"tasks": [{"id": "t1", "content": "Brew", "activeForm": "x"}]}),
        ("POST", f"{at}/tasks/t1", {"updates": {"status": "completed"}}),
        ("PUT", f"{at}/permissions", {"toolName": "checkout", "status": "granted"}),
        ("POST", f"{at}/inbox", {"item": item}),
        ("POST", f"{at}/inbox/update", {"itemId": item["id"], "updates": {"status": "consumed"}}),
        ("GET", f"{at}/inbox/resolved", None),
        ("POST", f"{at}/inbox/consume", None),
        ("POST", f"{at}/chat-url", None),
        ("POST", "/api/chat", {"messages": [{"sender": "user", "text": "Hello"}]}),
    ]
    for method, path, body in calls:
        result = call(page, "", method, path, body)
        assert result["status"] in (200, 201), (method, path, result)
    chat = call(page, "", "POST", "/api/chat", {"messages": [{"sender": "user", "text": "Hi"}]})
    assert '"type": "done"' in chat["body"]


def test_it_refuses_the_same_calls_from_another_origin(server, logged_in, other_origin):
    page = logged_in
    sid = json.loads(call(page, "", "POST", "/api/sessions", {})["body"])["sessionId"]
    messages = f"/api/sessions/{sid}/messages"
    body = {"messages": [{"sender": "user", "text": "forged"}]}

    page.goto(f"{other_origin}/index.html")
    # A CORS request: the browser's preflight gets no CORS answer, so nothing is sent.
    for path, payload in ((messages, body), ("/api/chat", body)):
        result = call(page, server.url, "POST", path, payload)
        assert result["status"] == 0 and "Failed to fetch" in result["error"], result
    # A no-cors request goes out with the cookie, but as text/plain: the CSRF check refuses it.
    blind = call(page, server.url, "POST", messages, body, mode="no-cors")
    assert blind["type"] == "opaque"

    page.goto(f"{server.url}/")
    assert call(page, "", "GET", messages)["body"] == "[]"
