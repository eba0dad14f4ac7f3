"""Docs rendered live from the workspace folder, and Markdown comments, as safe HTML.

Every read goes through `paths.open_inside` (inside the root after resolving symlinks,
capped in size); Markdown and HTML are sanitised with nh3; code is highlighted server-side
with Pygments, so the page needs no script from anywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote

import nh3
from django.conf import settings
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound

from inbox.workspaces import paths

MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdx"}
HTML_EXTENSIONS = {".html", ".htm"}
IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".avif", ".svg"}
TEXT_EXTENSIONS = {".txt", ".log", ".text", ""}
SNIFF_BYTES = 8192

_FORMATTER = HtmlFormatter(cssclass="highlight")
_BARE = HtmlFormatter(nowrap=True)
_TAGS = set(nh3.ALLOWED_TAGS) | {"span", "pre", "code", "div", "img", "input"}
_ATTRIBUTES = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "span": {"class"},
    "code": {"class"},
    "pre": {"class"},
    "div": {"class"},
    "img": {"src", "alt", "title", "width", "height"},
    "input": {"type", "checked", "disabled"},
}


def _highlight_fence(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes and wraps it itself
    return _pre(highlight(code, lexer, _BARE))


def _pre(inner: str) -> str:
    # Starting with "<pre" tells markdown-it not to wrap it once more.
    return f'<pre class="highlight"><code>{inner}</code></pre>'


_MARKDOWN = MarkdownIt("commonmark", {"html": True, "breaks": True, "highlight": _highlight_fence})
_MARKDOWN.enable(["table", "strikethrough"])


def sanitise(html: str) -> str:
    return nh3.clean(
        html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"}
    )


def markdown_html(text: str) -> str:
    return sanitise(_MARKDOWN.render(text))


def code_html(text: str, filename: str) -> str | None:
    try:
        lexer = get_lexer_for_filename(filename, stripnl=False)
    except ClassNotFound:
        return None
    return _pre(highlight(text, lexer, _BARE))


@dataclass
class RenderedDoc:
    path: str
    kind: str  # markdown | html | code | text | image | binary | missing | too_large | invalid
    html: str = ""
    text: str = ""
    message: str = ""
    size: int = 0
    url: str = ""

    @property
    def downloadable(self) -> bool:
        """Offered as a download: the file is there and the download route serves its size
        (a link is never offered to a refusal)."""
        return self.kind not in ("missing", "invalid") and self.size <= download_max_bytes()


def download_max_bytes() -> int:
    """The largest file the download route streams (GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES);
    the render cap (GLOVE_WORKSPACE_FILE_MAX_BYTES) is far smaller."""
    return int(getattr(settings, "GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES", 100 << 20))


def _size_words(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB" if size >= 1 << 20 else f"{size // 1024} KB"


def render_doc(*, files_url: str, root: str, rel: str, max_bytes: int) -> RenderedDoc:
    """`rel` inside `root`, rendered; `files_url` is the workspace's file route wherever the
    project mounted the API (`reverse("workspace-file", ...)`)."""
    doc = RenderedDoc(path=rel, kind="missing", url=f"{files_url}?path={quote(rel, safe='')}")
    if not os.path.isdir(root):
        doc.message = "Workspace folder no longer exists — it may have been moved or deleted."
        return doc
    try:
        opened = paths.open_inside(root, rel)
    except paths.PathRefused:
        doc.kind, doc.message = "invalid", "Invalid path: it leads outside the workspace."
        return doc
    except paths.FileMissing:
        doc.message = (
            "File not found at this path — it may have been moved, renamed, or deleted in the "
            "workspace since this entry was sent."
        )
        return doc
    doc.size = opened.size
    extension = os.path.splitext(rel)[1].lower()
    try:
        if extension in IMAGE_EXTENSIONS:
            doc.kind = "image"
            return doc
        if opened.size > max_bytes:
            doc.kind = "too_large"
            if doc.downloadable:
                doc.message = (
                    f"File too large to show in the inbox ({_size_words(opened.size)}; "
                    f"the inbox shows files up to {_size_words(max_bytes)})."
                )
            else:
                doc.message = (
                    f"File too large to show or download here ({_size_words(opened.size)}; "
                    f"downloads stop at {_size_words(download_max_bytes())}). "
                    "Open the workspace folder to view it."
                )
            return doc
        data = _read_all(opened.fd, opened.size)
    finally:
        os.close(opened.fd)
    if b"\x00" in data[:SNIFF_BYTES]:
        doc.kind = "binary"
        return doc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        doc.kind = "binary"
        return doc
    if extension in MARKDOWN_EXTENSIONS:
        doc.kind, doc.html = "markdown", markdown_html(text)
    elif extension in HTML_EXTENSIONS:
        doc.kind, doc.html = "html", sanitise(text)
    elif extension not in TEXT_EXTENSIONS and (highlighted := code_html(text, rel)) is not None:
        doc.kind, doc.html = "code", highlighted
    else:
        doc.kind, doc.text = "text", text
    return doc


def _read_all(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def pygments_css() -> str:
    return _FORMATTER.get_style_defs(".highlight")
