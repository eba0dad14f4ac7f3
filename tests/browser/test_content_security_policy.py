"""Issue 22: the pages sent no Content-Security-Policy, and rendered docs could load remote
images (a tracking pixel). The chat page and /inbox/ work under the policy with no
violation, an injected inline script does not run, a remote image is a link."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import wait_until
from tests.browser.test_coffee_shop import log_in, say
from tests.browser.test_workspace_inbox import push
from tests.inbox.workspaces.conftest import make_workspace

pytestmark = pytest.mark.browser

WAIT_MS = 20_000
WATCH_VIOLATIONS = (
    "window.__csp = [];"
    "document.addEventListener('securitypolicyviolation',"
    " (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)
DOC = """# Quarterly notes

![tracking pixel](https://tracker.invalid/pixel.gif?who=demo)

<script>window.__injected = 1</script>
<p onclick="window.__injected = 2">Numbers up **4%**.</p>
"""


USERNAME, PASSWORD = "csp-checker", "csp-browser-pw-1"


@pytest.fixture(scope="module")
def doc_workspace(server, tmp_path_factory):
    # A user of its own: the demo user's inbox is another test's to count.
    server.add_user(USERNAME, PASSWORD)
    root = tmp_path_factory.mktemp("csp-workspace")
    (root / "notes.md").write_text(DOC)
    return make_workspace(server, root, USERNAME, owner_token="")


def _watch(page: Page) -> list[str]:
    console: list[str] = []
    page.on(
        "console",
        lambda message: (
            console.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.add_init_script(WATCH_VIOLATIONS)
    return console


def _violations(page: Page, console: list[str]) -> list[str]:
    return [*console, *page.evaluate("window.__csp || []")]


def test_the_chat_page_and_the_inbox_work_under_the_policy(server, browser, doc_workspace):
    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    console = _watch(page)

    log_in(page, server.url, USERNAME, PASSWORD)
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    policy = page.evaluate(
        "fetch(location.href).then(r => r.headers.get('content-security-policy'))"
    )
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")  # websocket
    say(page, "Do you have Yirgacheffe?")  # htmx posts, the live socket answers
    expect(page.locator("#messages")).to_contain_text("out of stock")
    assert _violations(page, console) == []

    entry_id = push(doc_workspace, docs=[{"path": "notes.md"}], comments="See the notes")
    page.goto(f"{server.url}/inbox/")
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    page.locator(f'.inbox-row[data-id="{entry_id}"]').click()
    detail = page.locator("#inbox-detail")
    expect(detail.locator(".doc--markdown h1")).to_have_text("Quarterly notes")
    remote = detail.locator("a.doc__remote-image")
    expect(remote).to_have_text("tracking pixel (image on tracker.invalid, not loaded)")
    assert remote.get_attribute("href") == "https://tracker.invalid/pixel.gif?who=demo"
    detail.locator("p", has_text="Numbers up").click()
    assert page.evaluate("window.__injected") is None
    assert not [url for url in requests if "tracker.invalid" in url]
    assert _violations(page, console) == []

    # What the policy is for: an inline script that got in anyway does not run.
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.__injected = 3'; document.body.append(s); }"
    )
    wait_until(page, "window.__csp.length > 0")
    assert page.evaluate("window.__injected") is None
    context.close()
