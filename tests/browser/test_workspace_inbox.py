"""The workspace inbox page in a real browser: entries pushed over MCP arrive live, the
keyboard (j/k/Enter, Delete) drives it, deletes can be undone, read state survives a reload,
docs render."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import DEMO_PASSWORD, screenshot_path, wait_until
from tests.browser.test_coffee_shop import log_in, open_live_page
from tests.inbox.workspaces.conftest import make_workspace
from tests.inbox.workspaces.test_mcp import call, result_json

pytestmark = pytest.mark.browser

WAIT_MS = 20_000
READ = re.compile(r"\bis-read\b")
SELECTED = re.compile(r"\bis-selected\b")

REPORT = """# FOMC preview

Rates held at **5.25%**; the statement softened.

```python
def spread(a, b):
    return a - b
```
"""


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + b"\x5e\x6a\xd2" * 16 for _ in range(16))
    header = struct.pack(">IIBBBBB", 16, 16, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def push(workspace, **arguments) -> str:
    # Sync Playwright owns this thread's event loop: the MCP client runs in another thread.
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(asyncio.run, call(workspace, "inbox_push", arguments)).result()
    return result_json(result)["entryId"]


@pytest.fixture(scope="module")
def workspace(server, tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-workspace")
    (root / "research").mkdir()
    (root / "research" / "fomc.md").write_text(REPORT)
    (root / "model.py").write_text("import math\n\nprint(math.pi)\n")
    (root / "chart.png").write_bytes(tiny_png())
    (root / "dump.bin").write_bytes(bytes(range(256)))
    return make_workspace(server, root, "demo", owner_token="")


def row(page: Page, entry_id: str):
    return page.locator(f'.inbox-row[data-id="{entry_id}"]')


def test_the_inbox_page_end_to_end(server, browser, workspace, tmp_path):
    expect.set_options(timeout=WAIT_MS)
    context, page = open_live_page(
        browser, server.url, "demo", DEMO_PASSWORD, "/inbox/", height=860
    )

    # Pushed over MCP while the page is open: they arrive live, newest first, unread.
    report_id = push(
        workspace,
        docs=[
            {"path": "research/fomc.md"},
            {"path": "model.py"},
            {"path": "chart.png"},
            {"path": "dump.bin"},
        ],
        comments="Drafted the **FOMC** piece.\n\nWant a take on the rates section?",
    )
    question_id = push(workspace, comments="Blocked: which index should I use?")
    expect(row(page, question_id)).to_be_visible()
    expect(row(page, report_id)).to_be_visible()
    expect(page.locator(".inbox-row").first).to_have_attribute("data-id", question_id)
    expect(page.locator(".inbox-group").first).to_have_text("Today")
    expect(row(page, report_id)).not_to_have_class(READ)
    expect(page.locator("#inbox-badge")).to_have_text("2")
    assert page.evaluate("window.stillTheSamePage") is True

    # j opens the newest, j again the report: its docs render live from the folder.
    page.keyboard.press("j")
    expect(page.locator("#inbox-detail")).to_contain_text("which index should I use?")
    page.keyboard.press("j")
    detail = page.locator("#inbox-detail")
    expect(detail.locator(".doc--markdown h1")).to_have_text("FOMC preview")
    expect(detail.locator(".doc--markdown strong").first).to_have_text("5.25%")
    expect(detail.locator(".doc--markdown .highlight .k").first).to_have_text("def")
    expect(detail.locator(".doc--code .highlight")).to_contain_text("print")
    image = detail.locator(".doc--image img")
    expect(image).to_be_visible()
    wait_until(page, "document.querySelector('.doc--image img').naturalWidth === 16")
    download = detail.locator(".doc__binary a")
    expect(download).to_have_text("Download dump.bin")
    with page.expect_download() as pending:
        download.click()
    assert pending.value.suggested_filename == "dump.bin"
    expect(detail.locator(".entry__comments strong")).to_have_text("FOMC")
    expect(page.locator("#inbox-badge")).to_be_hidden()
    page.screenshot(path=screenshot_path("inbox.png", tmp_path))

    # Read state is on the server: it survives a reload.
    page.reload()
    expect(row(page, report_id)).to_have_class(READ)
    expect(row(page, question_id)).to_have_class(READ)

    # Delete with undo, then for good.
    row(page, question_id).click()
    expect(page.locator("#inbox-detail")).to_contain_text("which index")
    page.keyboard.press("Delete")
    expect(row(page, question_id)).to_have_count(0)
    expect(page.locator("#inbox-toast")).to_be_visible()
    page.get_by_role("button", name="Undo").click()
    expect(row(page, question_id)).to_be_visible()
    expect(page.locator("#inbox-toast")).to_be_hidden()
    page.keyboard.press("Backspace")
    expect(row(page, question_id)).to_have_count(0)
    expect(page.locator("#inbox-toast")).to_be_hidden()  # the undo window passed: sent
    page.reload()
    expect(row(page, report_id)).to_be_visible()
    expect(row(page, question_id)).to_have_count(0)

    # A deletion in another tab reaches this one live.
    other = context.new_page()
    other.goto(f"{server.url}/inbox/?entry={report_id}")
    expect(other.locator("#live-state")).to_have_attribute("data-state", "open")
    other.locator("#inbox-detail").get_by_role("button", name="Delete").click()
    expect(row(page, report_id)).to_have_count(0)
    context.close()


def test_the_list_pages_in_older_entries_as_it_scrolls(server, browser, workspace, tmp_path):
    lines = [
        json.dumps(
            {
                "id": str(uuid.uuid4()),
                "ts": 1_600_000_000_000 + n * 60_000,
                "workspaceId": workspace.id,
                "workspaceLabel": "Archive",
                "comments": f"Old check-in {n}",
            }
        )
        for n in range(120)
    ]
    file = tmp_path / "entries.jsonl"
    file.write_text("\n".join(lines) + "\n")
    server.manage("import_workspace_inbox", str(file))
    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD, next_url="/inbox/")
    rows = page.locator(".inbox-row")
    expect(rows).to_have_count(50)
    expect(page.locator(".inbox-group").last).to_have_text("Older")
    page.locator("#inbox-more").scroll_into_view_if_needed()
    expect(rows).to_have_count(100)
    page.locator("#inbox-more").scroll_into_view_if_needed()
    expect(rows).to_have_count(120)
    expect(page.locator("#inbox-more")).to_be_hidden()
    expect(rows.last).to_contain_text("Old check-in 0")
    context.close()


def test_j_and_k_move_through_the_list_and_enter_opens_the_focused_entry(
    server, browser, workspace
):
    older = push(workspace, comments="Older: the weekly numbers are in.")
    newer = push(workspace, comments="Newer: the draft is ready for review.")
    expect.set_options(timeout=WAIT_MS)
    context, page = open_live_page(
        browser, server.url, "demo", DEMO_PASSWORD, "/inbox/", height=860
    )
    detail = page.locator("#inbox-detail")

    page.keyboard.press("j")
    expect(detail).to_contain_text("the draft is ready")
    expect(row(page, newer)).to_have_class(SELECTED)
    page.keyboard.press("j")
    expect(detail).to_contain_text("the weekly numbers")
    expect(page).to_have_url(re.compile(rf"\?entry={older}$"))
    page.keyboard.press("k")
    expect(detail).to_contain_text("the draft is ready")
    row(page, older).locator(".inbox-row__link").focus()
    page.keyboard.press("Enter")
    expect(detail).to_contain_text("the weekly numbers")
    expect(row(page, older)).to_have_class(SELECTED)
    expect(row(page, newer)).not_to_have_class(SELECTED)
    assert page.evaluate("window.stillTheSamePage") is True
    context.close()
