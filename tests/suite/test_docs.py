"""The documentation: a README of at most 15 KB whose links resolve, and a site under docs/
that builds offline with no warning (MkDocs --strict checks every internal link and anchor)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_it_builds_the_site_with_no_warning_and_no_broken_link(build):
    _, output = build

    assert "WARNING" not in output
    assert "ERROR" not in output


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


def test_it_generates_every_declared_setting_into_the_reference(build):
    site, _ = build
    page = (site / "reference" / "settings.html").read_text()

    assert [var.name for var in DECLARATIONS if f'id="{var.name}"' not in page] == []
