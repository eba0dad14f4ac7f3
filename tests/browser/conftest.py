"""A real server and Debian's Chromium for the browser tests.

The server is Daphne in its own process (as `make run` starts it) on a free port, with its own
SQLite file, the in-memory channel layer, the offline demo model and the demo users from
`setup_demo`. DEBUG is on in that process only so that it serves the static files (htmx,
live.js) itself, as `make run` does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.liveserver import LiveServer
from tests.conftest import service_missing

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DEMO_PASSWORD = "demo-browser-pw-1"
STAFF_PASSWORD = "staff-browser-pw-1"
BARISTA_PASSWORD = "barista-browser-pw-1"
# Set GLOVE_SCREENSHOTS=1 to refresh the screenshots the README and docs/ show, from the browser test.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "gloveapp" / "static" / "screenshots"


_servers: list[LiveServer] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # A failed browser test says little by itself: attach what the server logged.
    outcome = yield
    report = outcome.get_result()
    if report.failed and _servers:
        report.sections.append(("server log", _servers[0].log_tail(8000)))


def demo_server(**extra_env: str) -> LiveServer:
    """A server as the browser tests run it: DEBUG (it serves its static files), no Redis,
    the demo users' passwords known; `extra_env` on top."""
    return LiveServer(
        extra_env={
            "DEBUG": "1",
            "REDIS_URL": "",
            "DEMO_PASSWORD": DEMO_PASSWORD,
            "STAFF_PASSWORD": STAFF_PASSWORD,
            "BARISTA_PASSWORD": BARISTA_PASSWORD,
            **extra_env,
        }
    )


# One server for the whole browser pass: starting one (migrations, the demo data, a turn
# worker) cost more than most browser tests; each test makes the chats and items it reads.
@pytest.fixture(scope="session")
def server() -> Iterator[LiveServer]:
    live = demo_server()
    with live:
        live.manage("setup_demo")
        live.start_worker()
        _servers.append(live)
        yield live
        _servers.remove(live)


# Module scope, not session: while sync Playwright runs, its event loop counts as running in
# this thread, and every async test collected after this folder would fail to start.
@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        service_missing(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


# The ones the README and docs/ show; the browser tests' other screenshots stay in their tmp_path.
README_SCREENSHOTS = {
    "chat.png",
    "admin.png",
    "admin-session.png",
    "api-docs.png",
    "inbox.png",
    "handoff-customer.png",
    "handoff-console.png",
}


def screenshot_path(name: str, tmp_path: Path) -> Path:
    if name in README_SCREENSHOTS and os.environ.get("GLOVE_SCREENSHOTS", "") in {
        "1",
        "true",
        "yes",
    }:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        return SCREENSHOTS / name
    return tmp_path / name


def wait_until(page, expression: str, timeout: float = 10.0) -> None:
    """Poll a JavaScript expression until it is truthy.

    Playwright's `wait_for_function` evaluates its string inside the page, which the pages'
    Content Security Policy forbids (no 'unsafe-eval') once the first check is false;
    `page.evaluate` goes through the debugging protocol, which the policy does not govern.
    """
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        time.sleep(0.05)
