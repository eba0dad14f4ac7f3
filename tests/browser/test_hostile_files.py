"""Issue 22 in Chromium: a workspace file named `ﬁ.html` was rendered inline on the app's
origin (its Content-Disposition was RFC 2047-encoded, which browsers ignore). It downloads."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from tests.browser.test_coffee_shop import log_in
from tests.inbox.workspaces.conftest import make_workspace

pytestmark = pytest.mark.browser

WAIT_MS = 20_000
PAYLOAD = "<html><body><h1 id=owned>phish</h1><script>document.title='ran'</script></body></html>"


USERNAME, PASSWORD = "file-prober", "prober-browser-pw-1"


@pytest.fixture(scope="module")
def hostile_workspace(server, tmp_path_factory):
    # A user of its own: the demo user's workspaces and inbox are other tests' to count.
    server.add_user(USERNAME, PASSWORD)
    root = tmp_path_factory.mktemp("hostile-workspace")
    for name in ("\ufb01.html", "drawing.svg", "feed.xml"):
        (root / name).write_text(PAYLOAD)
    return make_workspace(server, root, USERNAME, owner_token="")


@pytest.mark.parametrize("name", ["\ufb01.html", "drawing.svg", "feed.xml"])
def test_a_markup_file_downloads_in_chromium_instead_of_rendering(
    server, browser, hostile_workspace, name
):
    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    log_in(page, server.url, USERNAME, PASSWORD, next_url="/inbox/")
    expect(page).to_have_url(f"{server.url}/inbox/")
    url = f"/api/workspaces/{hostile_workspace.id}/file?path={quote(name, safe='')}"
    # A plain link, as a comment would carry: no `download` attribute to help.
    page.evaluate(
        "(url) => { const a = document.createElement('a'); a.href = url; a.id = 'probe';"
        " a.textContent = 'open'; document.body.append(a); }",
        url,
    )
    with page.expect_download() as info:
        page.click("#probe")
    download = info.value
    assert download.suggested_filename == name
    assert page.url == f"{server.url}/inbox/"  # the page stayed; nothing rendered in its place
    assert page.title() != "ran"
    assert page.locator("#owned").count() == 0
    context.close()
