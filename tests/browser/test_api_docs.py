"""The API docs in a browser with the internet cut off: Swagger UI still draws every route."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.browser.conftest import screenshot_path

pytestmark = pytest.mark.browser


def test_it_draws_the_api_docs_with_no_internet(server, browser, tmp_path):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    own_host = urlsplit(server.url).netloc
    elsewhere: list[str] = []

    def only_this_server(route) -> None:
        if urlsplit(route.request.url).netloc == own_host:
            route.continue_()
        else:  # what a machine without internet would get
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto(f"{server.url}/api/docs/")
    page.wait_for_selector(".opblock", timeout=15_000)

    assert elsewhere == []
    assert page.locator(".opblock").count() >= 20
    assert page.get_by_text("/api/sessions/{session_id}/inbox/update").first.is_visible()
    page.screenshot(path=screenshot_path("api-docs.png", tmp_path))

    page.goto(f"{server.url}/api/")
    assert page.get_by_role("link", name="Interactive docs").is_visible()
    page.screenshot(path=screenshot_path("api-index.png", tmp_path))
    context.close()
