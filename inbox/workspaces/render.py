"""Docs rendered live from the workspace folder, and Markdown comments, as safe HTML.

Every read goes through `paths.open_inside` (inside the root after resolving symlinks,
capped in size); Markdown and HTML are sanitised with nh3; code is highlighted server-side
with Pygments, so the page needs no script from anywhere.

Rendering is bounded, because deeply nested HTML can hold the sanitiser for minutes (the
figures: docs/explanation/workspace-inbox.md).
Before anything is parsed, a linear scan estimates the cost: HTML nested deeper than
`GLOVE_WORKSPACE_RENDER_MAX_DEPTH` or with more than `GLOVE_WORKSPACE_RENDER_MAX_ELEMENTS`
tags (Markdown: twice as many markup characters) is not rendered ("too complex to render
here", with its download link). What passes renders in a worker thread that the request
waits for at most `GLOVE_WORKSPACE_RENDER_SECONDS`. The outcome, render or refusal, is kept
in Django's cache under the file's (path, size, modification time, inode), so reopening an
entry costs a `stat`.
"""

from __future__ import annotations

import hashlib
import html as html_module
import os
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

import nh3
from django.conf import settings
from django.core.cache import cache
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


# A soft line break stays a soft break, as Markdown means it (a wrapped paragraph reads as
# one paragraph); two spaces or a backslash at a line's end make a hard one.
_MARKDOWN = MarkdownIt("commonmark", {"html": True, "breaks": False, "highlight": _highlight_fence})
_MARKDOWN.enable(["table", "strikethrough"])


def sanitise(html: str, images: ImageResolver | None = None) -> str:
    clean = nh3.clean(
        html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"}
    )
    return unload_remote_images(clean, images) if "<img" in clean else clean


@dataclass(frozen=True, slots=True)
class ImageResolver:
    """A doc's relative images through the workspace's file route: `![](shots/a.png)` in
    `docs/guide.md` is `<files_url>?path=docs/shots/a.png`. A path that leaves the root
    (`../`) or names an absolute place is not followed (the image shows its alt text); the
    file route checks the rest (inside the root, by its own rules) when the browser asks."""

    files_url: str
    doc_dir: str = ""

    def url(self, src: str) -> str | None:
        path = urlsplit(html_module.unescape(src)).path
        if not path or path.startswith("/") or "\\" in path:
            return None
        joined = posixpath.normpath(posixpath.join(self.doc_dir, unquote(path)))
        if joined == ".." or joined.startswith("../") or joined.startswith("/"):
            return None
        return f"{self.files_url}?path={quote(joined, safe='/')}"


# nh3's output is regular: `<img` and its attributes double-quoted and escaped.
_IMG_RE = re.compile(r"<img\b([^>]*)>")
_ATTR_RE = re.compile(r'([a-z]+)="([^"]*)"')


def image_hosts() -> frozenset[str]:
    return frozenset(
        host.lower() for host in getattr(settings, "GLOVE_DOC_IMAGE_HOSTS", []) or [] if host
    )


def unload_remote_images(html: str, images: ImageResolver | None = None) -> str:
    """A remote image (a tracking pixel tells its sender when and where the doc was opened)
    becomes a link to it, unless its host is in `GLOVE_DOC_IMAGE_HOSTS` (HTTPS only); a
    relative one is read through the workspace's file route when `images` says where."""
    allowed = image_hosts()

    def replace(match: re.Match) -> str:
        attributes = dict(_ATTR_RE.findall(match.group(1)))
        src = attributes.get("src", "")
        if not src.lower().startswith(("http:", "https:", "//")):
            if images is None or not src:
                return match.group(0)  # relative to the page: this origin
            url = images.url(src)
            if url is None:
                return html_module.escape(html_module.unescape(attributes.get("alt") or ""))
            return match.group(0).replace(f'src="{src}"', f'src="{html_module.escape(url)}"', 1)
        url = html_module.unescape(src)
        where = urlsplit("https:" + url if url.startswith("//") else url)
        if where.scheme == "https" and (where.hostname or "") in allowed:
            return match.group(0)
        label = attributes.get("alt") or "image"
        host = html_module.escape(where.hostname or "another site")
        return (
            f'<a class="doc__remote-image" href="{src}" rel="noopener noreferrer nofollow">'
            f"{label} (image on {host}, not loaded)</a>"
        )

    return _IMG_RE.sub(replace, html)


def markdown_html(text: str, images: ImageResolver | None = None) -> str:
    return sanitise(_MARKDOWN.render(text), images)


# -- the cost bound ------------------------------------------------------------------------
# A tag, found without backtracking: `[^<>]*` stops at the next `<`, so a text full of `<`
# and no `>` is still one pass.
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)[^<>]*>")
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
# Elements whose end tag may be left out (the parser closes them): they never nest deeply.
_SELF_CLOSING_BY_PARSER = frozenset(
    "p li dt dd tr td th option optgroup thead tbody tfoot colgroup rb rt rp rtc".split()
)
_MARKDOWN_MARKUP = "*_[]`<!~"


@dataclass(frozen=True)
class RenderLimits:
    max_depth: int
    max_elements: int
    seconds: float


def render_limits() -> RenderLimits:
    return RenderLimits(
        max_depth=int(getattr(settings, "GLOVE_WORKSPACE_RENDER_MAX_DEPTH", 256)),
        max_elements=int(getattr(settings, "GLOVE_WORKSPACE_RENDER_MAX_ELEMENTS", 20000)),
        seconds=float(getattr(settings, "GLOVE_WORKSPACE_RENDER_SECONDS", 3.0)),
    )


def html_cost_problem(html: str, limits: RenderLimits) -> str | None:
    """Why `html` is too costly to sanitise, or None: one linear scan of its tags."""
    depth = elements = 0
    for match in _TAG_RE.finditer(html):
        closing, name = match.group(1), match.group(2).lower()
        if closing:
            depth = max(0, depth - 1) if name not in _SELF_CLOSING_BY_PARSER else depth
            continue
        elements += 1
        if elements > limits.max_elements:
            return f"more than {limits.max_elements:,} elements"
        if name in _VOID or name in _SELF_CLOSING_BY_PARSER or match.group(0).endswith("/>"):
            continue
        depth += 1
        if depth > limits.max_depth:
            return f"elements nested more than {limits.max_depth} deep"
    return None


def markdown_cost_problem(text: str, limits: RenderLimits) -> str | None:
    markup = sum(text.count(char) for char in _MARKDOWN_MARKUP)
    if markup > 2 * limits.max_elements:
        return f"more than {2 * limits.max_elements:,} markup characters"
    return html_cost_problem(text, limits)  # HTML inside Markdown is HTML


class TooComplex(Exception):
    """The doc would cost too much to render here; the message says why."""


def bounded_markdown_html(
    text: str, limits: RenderLimits | None = None, images: ImageResolver | None = None
) -> str:
    """`markdown_html` within the cost bound; raises `TooComplex`."""
    limits = limits or render_limits()
    problem = markdown_cost_problem(text, limits)
    if problem is None:
        rendered = _MARKDOWN.render(text)
        problem = html_cost_problem(rendered, limits)
        if problem is None:
            return sanitise(rendered, images)
    raise TooComplex(problem)


def bounded_html(
    text: str, limits: RenderLimits | None = None, images: ImageResolver | None = None
) -> str:
    """`sanitise` within the cost bound; raises `TooComplex`."""
    limits = limits or render_limits()
    problem = html_cost_problem(text, limits)
    if problem is not None:
        raise TooComplex(problem)
    return sanitise(text, images)


# Renders run here so that a request can stop waiting (a thread cannot be stopped; what it
# costs is bounded by the checks above).
_RENDERERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="doc-render")


def within_budget(function, *args, seconds: float):
    """`function(*args)` in a render thread; raises `TooComplex` past `seconds`."""
    future = _RENDERERS.submit(function, *args)
    try:
        return future.result(timeout=seconds)
    except FutureTimeout:
        future.cancel()
        raise TooComplex(f"it takes longer than {seconds:g} s to render") from None


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
    cached: bool = False  # this render came from the cache

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


def render_doc(
    *,
    files_url: str,
    root: str,
    rel: str,
    max_bytes: int,
    root_identity: tuple[int, int] | None = None,
) -> RenderedDoc:
    """`rel` inside `root`, rendered; `files_url` is the workspace's file route wherever the
    project mounted the API (`reverse("workspace-file", ...)`)."""
    doc = RenderedDoc(path=rel, kind="missing", url=f"{files_url}?path={quote(rel, safe='')}")
    if not os.path.isdir(root):
        doc.message = "Workspace folder no longer exists — it may have been moved or deleted."
        return doc
    try:
        opened = paths.open_inside(root, rel, identity=root_identity)
    except paths.RootReplaced as exc:
        doc.kind, doc.message = "invalid", f"Not shown: {exc}."
        return doc
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
        limits = render_limits()
        key = _cache_key(opened, rel, limits, files_url)
        remembered = cache.get(key)
        if remembered is not None:
            doc.kind, doc.html, doc.text, doc.message = remembered
            doc.cached = True
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
    try:
        images = ImageResolver(files_url, posixpath.dirname(rel))
        if extension in MARKDOWN_EXTENSIONS:
            doc.kind = "markdown"
            doc.html = within_budget(
                bounded_markdown_html, text, limits, images, seconds=limits.seconds
            )
        elif extension in HTML_EXTENSIONS:
            doc.kind = "html"
            doc.html = within_budget(bounded_html, text, limits, images, seconds=limits.seconds)
        elif extension not in TEXT_EXTENSIONS and (
            highlighted := within_budget(code_html, text, rel, seconds=limits.seconds)
        ):
            doc.kind, doc.html = "code", highlighted
        else:
            doc.kind, doc.text = "text", text
    except TooComplex as why:
        doc.kind, doc.html, doc.text = "too_complex", "", ""
        doc.message = (
            f"This document is too complex to render here ({why}); download it to read it."
        )
    if doc.kind != "text":  # plain text costs nothing to show again
        cache.set(key, (doc.kind, doc.html, doc.text, doc.message), RENDER_CACHE_SECONDS)
    return doc


RENDER_CACHE_SECONDS = 7 * 24 * 3600
RENDER_VERSION = 3  # bump when the rendering changes


def _cache_key(opened: paths.OpenedFile, rel: str, limits: RenderLimits, files_url: str) -> str:
    version = (
        f"{RENDER_VERSION}|{files_url}|{opened.real_path}|{rel}|{opened.size}|{opened.mtime_ns}|"
        f"{opened.inode}|{limits.max_depth}|{limits.max_elements}|{sorted(image_hosts())}"
    )
    return "glove:doc:" + hashlib.sha256(version.encode("utf-8", "surrogateescape")).hexdigest()


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
