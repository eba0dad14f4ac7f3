"""The documentation: a README of at most 15 KB whose links resolve, and a site under docs/
that builds offline with no warning (MkDocs --strict checks every internal link and anchor)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from gloveapp.conf import DECLARATIONS

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).with_name("mkdocs")
# The Markdown files that live outside the site and link into it.
TOP_LEVEL_PAGES = ["README.md", "CHANGELOG.md", "bench/README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*(?:\{#([\w-]+)\})?\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[Path, str]:
    site = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={
            **os.environ,
            "NO_MKDOCS_2_WARNING": "1",
            "DJANGO_SETTINGS_MODULE": "gloveapp.settings",
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return site, output


@pytest.mark.process
def test_it_builds_the_site_with_no_warning_and_no_broken_link(build):
    _, output = build

    assert "WARNING" not in output
    assert "ERROR" not in output


@pytest.mark.process
def test_it_loads_nothing_from_another_host(build):
    site, _ = build
    loads = re.compile(
        r"<(?:script|img|iframe)[^>]*\ssrc=\"(?:https?:)?//"
        r"|<link[^>]*\shref=\"(?:https?:)?//"
        r"|@import\s+(?:url\()?[\"']?(?:https?:)?//"
        r"|fonts\.googleapis"
    )
    offenders = [
        str(path.relative_to(site))
        for path in site.rglob("*")
        if path.suffix in {".html", ".css"} and loads.search(path.read_text(errors="replace"))
    ]

    assert offenders == []


@pytest.mark.process
def test_it_generates_every_declared_setting_into_the_reference(build):
    site, _ = build
    page = (site / "reference" / "settings.html").read_text()

    assert [var.name for var in DECLARATIONS if f'id="{var.name}"' not in page] == []


@pytest.mark.process
def test_it_pastes_the_tour_file_into_the_tutorial(build):
    site, _ = build
    page = (site / "tutorial" / "python.html").read_text()

    assert "check_stock" in page
    assert "--8&lt;--" not in page


def test_it_keeps_the_readme_within_15_kb():
    assert (ROOT / "README.md").stat().st_size <= 15 * 1024


def anchors_of(page: Path) -> set[str]:
    text = page.read_text()
    return {explicit or slugify(title, "-") for title, explicit in HEADING.findall(text)}


@pytest.mark.parametrize("name", TOP_LEVEL_PAGES)
def test_it_links_from_the_top_level_pages_only_to_what_exists(name):
    page = ROOT / name
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # another site, or mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors_of(linked):
            broken.append(target)

    assert broken == []
