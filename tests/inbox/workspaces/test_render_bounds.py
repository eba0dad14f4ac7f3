"""Issue 22: a 750 KB workspace file of nested <div>s took 112 s of CPU to open, on every view.
Rendering is now bounded before the sanitiser runs, limited in time, and cached per version."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from inbox.workspaces import render
from inbox.workspaces.services import entry_push, workspace_create

pytestmark = [pytest.mark.django_db]

NESTED = "<div>" * 150_000  # 750 KB, under the 1 MiB render cap
FALLBACK = "too complex to render here"


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("ann", password="pw-ann-123456")


@pytest.fixture
def root(tmp_path):
    (tmp_path / "nested.html").write_text(NESTED)
    (tmp_path / "nested.md").write_text("# Deep\n\n" + NESTED)
    (tmp_path / "brackets.md").write_text("[" * 750_000)
    (tmp_path / "fine.md").write_text("# Fine\n\n" + "Some *nested* <span>text</span>.\n\n" * 50)
    return tmp_path


def _open(client: Client, entry_id) -> tuple[str, float]:
    started = time.perf_counter()
    response = client.get(f"/inbox/entries/{entry_id}")
    assert response.status_code == 200
    return response.content.decode(), time.perf_counter() - started


def test_the_750_kb_nested_file_is_refused_before_sanitising_and_offered_as_a_download(
    owner, root, capsys
):
    workspace, _ = workspace_create(label="Probe", root=str(root), owner=owner)
    entry = entry_push(workspace=workspace, docs=[{"path": "nested.html"}, {"path": "nested.md"}])
    client = Client()
    client.force_login(owner)
    client.get("/inbox/")  # warm: templates compiled, so the timing below is the entry's
    html, first = _open(client, entry.pk)
    assert html.count(FALLBACK) == 2
    assert "Download nested.html" in html and "Download nested.md" in html
    assert "elements nested more than 256 deep" in html
    html, second = _open(client, entry.pk)
    assert html.count(FALLBACK) == 2
    with capsys.disabled():
        print(
            f"\n[render bound] 750 KB nested file: first open {first:.3f} s, second {second:.3f} s"
        )


def test_markdown_that_would_take_seconds_to_parse_is_refused_too(owner, root):
    doc = render.render_doc(files_url="/f", root=str(root), rel="brackets.md", max_bytes=1 << 20)
    assert doc.kind == "too_complex"
    assert "markup characters" in doc.message


def test_reopening_a_doc_is_served_from_the_cache_until_the_file_changes(root, monkeypatch):
    def rendered(rel: str) -> render.RenderedDoc:
        return render.render_doc(files_url="/f", root=str(root), rel=rel, max_bytes=1 << 20)

    first = rendered("nested.html")
    assert (first.kind, first.cached) == ("too_complex", False)
    good = rendered("fine.md")
    assert good.kind == "markdown" and "<em>nested</em>" in good.html and not good.cached

    def no_reading(*args):
        raise AssertionError("a cached doc is not read again")

    monkeypatch.setattr(render, "_read_all", no_reading)
    again = rendered("nested.html")
    assert (again.kind, again.message, again.cached) == ("too_complex", first.message, True)
    assert rendered("fine.md").html == good.html
    monkeypatch.undo()
    # A new version of the file (size and modification time) renders again.
    (root / "fine.md").write_text("# Changed\n")
    changed = rendered("fine.md")
    assert "<h1>Changed</h1>" in changed.html and not changed.cached


def test_a_render_that_outlasts_its_budget_gives_the_fallback(root, settings):
    settings.GLOVE_WORKSPACE_RENDER_SECONDS = 0.001
    (root / "slow.md").write_text("[" * 30_000)  # under the markup bound, ~0.5 s to parse
    doc = render.render_doc(files_url="/f", root=str(root), rel="slow.md", max_bytes=1 << 20)
    assert doc.kind == "too_complex"
    assert "takes longer than 0.001 s" in doc.message


def test_the_cost_scan_is_linear_on_text_full_of_unclosed_angle_brackets():
    limits = render.render_limits()
    started = time.process_time()
    assert render.html_cost_problem("<a" * 400_000, limits) is None
    assert render.html_cost_problem("<br>" * 10 + "<p>" * 1000, limits) is None
    assert time.process_time() - started < 30  # generous: only a quadratic scan fails this


def test_comments_too_complex_to_render_are_shown_as_text(owner, root):
    workspace, _ = workspace_create(label="Probe", root=str(root), owner=owner)
    entry = entry_push(workspace=workspace, comments="<div>" * 1000)
    client = Client()
    client.force_login(owner)
    html, _ = _open(client, entry.pk)
    assert "&lt;div&gt;" in html


def test_a_remote_image_is_a_link_unless_its_host_is_allowed(root, settings):
    (root / "pixel.md").write_text(
        "![pixel](https://tracker.example/p.gif?u=1)\n\n![ours](https://img.example.org/a.png)"
        '\n\n<img src="//tracker.example/q.png">\n\n![local](chart.png)\n'
    )

    def rendered() -> str:
        return render.render_doc(
            files_url="/f", root=str(root), rel="pixel.md", max_bytes=1 << 20
        ).html

    html = rendered()
    assert "<img" in html and html.count("<img") == 1  # only the relative one
    assert 'href="https://tracker.example/p.gif?u=1"' in html
    assert "pixel (image on tracker.example, not loaded)" in html
    assert "image (image on tracker.example, not loaded)" in html
    settings.GLOVE_DOC_IMAGE_HOSTS = ["img.example.org"]
    html = rendered()  # the allowed hosts are part of the cache key
    assert '<img src="https://img.example.org/a.png" alt="ours">' in html
    assert "tracker.example/p.gif" in html and html.count("<img") == 2


def test_pages_send_a_policy_that_runs_no_inline_script(owner):
    client = Client()
    client.force_login(owner)
    for url in ("/", "/inbox/", "/accounts/tokens/", "/accounts/login/"):
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert directives["script-src"] == "'self'", url
        assert directives["style-src"] == "'self'", url
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
