"""The README's six steps after `make run`, walked in Chromium as the customer, staff, a
barista and an operator would: every page on the way must show no internal name, tag, id or
JSON (tests/browser/audit.py's deny-list) and no text below WCAG AA contrast.

The server runs as `make run` starts it: the chats on the mesh (database transport), the
roastery agent beside it as a mesh peer, one turn worker.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.api.liveserver import ROOT, LiveServer
from tests.browser.audit import Problem, audit
from tests.browser.conftest import (
    BARISTA_PASSWORD,
    DEMO_PASSWORD,
    STAFF_PASSWORD,
    demo_server,
    screenshot_path,
)
from tests.browser.test_coffee_shop import log_in, say
from tests.inbox.workspaces.conftest import make_workspace

# Six steps, three people and a mesh peer: longer than one browser test (a loaded machine
# takes a minute to start the server, the worker and the peer).
pytestmark = [pytest.mark.browser, pytest.mark.timeout(480)]

WAIT_MS = 30_000


@pytest.fixture(scope="module")
def tour_server() -> Iterator[LiveServer]:
    # As `make run` starts it: the chats on the mesh, the roastery beside the server.
    live = demo_server(MESH_TRANSPORT="database", GLOVE_CHAT_MESH="true")
    with live:
        live.manage("setup_demo")
        live.start_worker()
        live.start_process(
            "run_agent", "roastery", "--mesh-id", "roastery", "--capability", "stock"
        )
        yield live


class Walk:
    """The pages seen on the way, each audited as it is looked at."""

    def __init__(self, tmp_path: Path) -> None:
        self.problems: list[Problem] = []
        self.tmp_path = tmp_path
        self.shots: list[Path] = []

    def look(self, page: Page, where: str, *, names: bool = True) -> None:
        self.problems += audit(page, where, names=names)
        shot = screenshot_path(f"tour-{len(self.shots):02d}-{where}.png", self.tmp_path)
        page.screenshot(path=shot, full_page=True)
        self.shots.append(shot)


def test_the_readme_steps_show_people_no_internal_name_and_no_faint_text(
    tour_server, browser, tmp_path
):
    server = tour_server
    walk = Walk(tmp_path)
    expect.set_options(timeout=WAIT_MS)

    # 1. Chat: the out-of-stock Yirgacheffe, a restock watch, 2 Kenya AA and a checkout.
    customer = browser.new_context(viewport={"width": 1280, "height": 900})
    page = customer.new_page()
    log_in(page, server.url, "demo", DEMO_PASSWORD)
    walk.look(page, "chats")
    page.keyboard.press("Tab")  # the skip link shows on focus
    walk.look(page, "chats-skip-link")
    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/]+/$"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "open")
    chat_url = page.url
    say(page, "do you have Yirgacheffe?")
    expect(page.locator("#messages")).to_contain_text("out of stock")
    say(page, "yes")
    watching = page.locator('[data-section="watching"] .inbox-item')
    expect(watching).to_have_count(1)
    walk.look(page, "chat-watch")
    say(page, "add 2 Kenya AA")
    expect(page.locator("#messages")).to_contain_text("Added 2")
    say(page, "checkout")
    page.get_by_role("button", name="Allow once").click()
    expect(page.locator("#slots")).to_contain_text("Confirm your order")
    walk.look(page, "chat-confirm")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#messages")).to_contain_text(re.compile(r"Order #\d+ is placed"))

    # 2. Admin: staff restock the Yirgacheffe; the customer's watch resolves live.
    staff = browser.new_context(viewport={"width": 1280, "height": 900})
    admin = staff.new_page()
    log_in(admin, server.url, "staff", STAFF_PASSWORD, next_url="/admin/demo/coffee/")
    admin.get_by_role("row", name=re.compile("Ethiopia Yirgacheffe")).get_by_role(
        "checkbox"
    ).check()
    admin.locator('select[name="action"]').select_option(value="restock_and_notify")
    admin.get_by_role("button", name="Run").click()
    expect(admin.locator(".messagelist")).to_be_visible()
    walk.look(admin, "admin-restocked", names=False)
    resolved = page.locator('[data-section="resolved"] .inbox-item')
    expect(resolved).to_have_count(1)
    walk.look(page, "chat-watch-resolved")
    say(page, "any news?")
    expect(page.locator("#messages")).to_contain_text("Yirgacheffe")
    expect(page.locator("#turn-status")).not_to_contain_text("working")
    walk.look(page, "chat-news")

    # 4. Mesh: Brew asks the roastery; the answer shows once, in words, and is passed on.
    say(page, "ask the roastery about Kenya AA")
    expect(page.locator("#inbox")).to_contain_text("answered", timeout=60_000)
    walk.look(page, "chat-mesh-answered")
    say(page, "thanks")
    expect(page.locator("#messages")).to_contain_text("bags of Kenya AA", timeout=60_000)
    walk.look(page, "chat-mesh-relayed")

    # A session's admin page reads as a transcript (staff's words: contrast only).
    key = chat_url.rstrip("/").rsplit("/", 1)[1]
    admin.goto(f"{server.url}/sessions/{key}/")
    walk.look(admin, "chat-as-staff")

    # 5. Approvals: a large order waits for a barista, who changes it and approves.
    say(page, "add 6 Colombia")
    expect(page.locator("#messages")).to_contain_text("Added 6")
    say(page, "checkout, pay at pickup")
    expect(page.locator("#slots")).to_contain_text("approve")
    walk.look(page, "chat-approval-waiting")
    admin.goto(f"{server.url}/sessions/{key}/")
    # Staff read who is awaited, in the chat and in the turn's timeline while it waits.
    awaited = "Waiting for a barista to approve the checkout"
    expect(admin.locator("#slots")).to_contain_text(awaited)
    admin.locator("#turn-timeline summary").click()
    timeline = admin.locator("#turn-timeline")
    expect(timeline).to_contain_text(re.compile(awaited + r" since \d{2}:\d{2}"))
    assert timeline.evaluate("el => el.scrollWidth - el.clientWidth") <= 0
    walk.look(admin, "chat-approval-waiting-as-staff")
    barista = browser.new_context(viewport={"width": 1280, "height": 900})
    approvals = barista.new_page()
    log_in(approvals, server.url, "barista", BARISTA_PASSWORD, next_url="/approvals/")
    approvals.locator("#approvals-list .approvals-row").first.click()
    quantity = approvals.get_by_label("Colombia Huila · quantity")
    walk.look(approvals, "approvals-open")
    quantity.fill("4")
    approvals.get_by_role("button", name="Approve with changes").click()
    expect(approvals.locator("#approvals-detail .approval__decision")).to_be_visible()
    walk.look(approvals, "approvals-decided")
    expect(page.locator("#slots")).to_contain_text("Confirm your order")
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator("#messages")).to_contain_text(re.compile(r"Order #\d+ is placed"))
    walk.look(page, "chat-approved")

    # 3. Workspace inbox: a note and README.md pushed over MCP, then a reply from the page.
    root = tmp_path / "workspace"
    root.mkdir()
    shutil.copy(ROOT / "README.md", root / "README.md")
    workspace = make_workspace(server, root, "demo", owner_token="")
    pushed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "mcp_client.py"),
            workspace.mcp_url,
            workspace.token,
            "--push",
            "Done: the overview is in README.md",
            "--doc",
            "README.md",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pushed.returncode == 0, pushed.stderr
    page.goto(f"{server.url}/inbox/")
    page.locator(".inbox-row").first.click()
    expect(page.locator(".entry-doc, .doc").first).to_be_visible()
    walk.look(page, "workspace-inbox")
    page.goto(f"{server.url}/notifications/")
    walk.look(page, "notifications")

    # 6. API: the routes' index and the token page.
    page.goto(f"{server.url}/api/")
    walk.look(page, "api-index", names=False)
    page.goto(f"{server.url}/accounts/tokens/")
    walk.look(page, "tokens")
    page.goto(f"{server.url}/")
    walk.look(page, "chats-after")

    # The operator's view: the usage page and the session's timeline in the admin.
    server.manage("usage_rollup")  # what the worker's scheduler does every few minutes
    admin.goto(f"{server.url}/admin/usage/")
    walk.look(admin, "usage", names=False)
    customer.close()
    staff.close()
    barista.close()

    assert not walk.problems, "\n".join(str(problem) for problem in walk.problems)
