"""What a page shows people, audited in the browser: every visible text against a deny-list
of the project's internal names and patterns, and against WCAG AA contrast.

`audit(page, where)` returns the problems it found as sentences (an empty list when the page
is clean): the test collects them over a walk and fails with all of them at once, so one run
names every leak and every faint text rather than the first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from playwright.sync_api import Page

# Every visible text node with its element's colours, font and the background behind it
# (composited up the tree: each ancestor's background colour, alpha included, until an opaque
# one; a background image ends the walk as "unknown" and the node is not judged). Text inside
# a closed <details> (its summary excepted), hidden, transparent or clipped to a pixel (the
# screen readers' text) is not visible and not read.
TEXTS_JS = r"""
() => {
  const parse = (value) => {
    const m = value.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const parts = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
    return {r: parts[0], g: parts[1], b: parts[2], a: parts.length > 3 ? parts[3] : 1};
  };
  const over = (top, under) => {
    const a = top.a + under.a * (1 - top.a);
    if (a === 0) return {r: 0, g: 0, b: 0, a: 0};
    const mix = (k) => (top[k] * top.a + under[k] * under.a * (1 - top.a)) / a;
    return {r: mix("r"), g: mix("g"), b: mix("b"), a};
  };
  const background = (element) => {
    const layers = [];
    for (let node = element; node && node.nodeType === 1; node = node.parentElement) {
      const style = getComputedStyle(node);
      if (style.backgroundImage && style.backgroundImage !== "none") return null;
      const colour = parse(style.backgroundColor);
      if (colour && colour.a > 0) {
        layers.push(colour);
        if (colour.a >= 1) break;
      }
    }
    let result = {r: 255, g: 255, b: 255, a: 1};  // the canvas
    for (let i = layers.length - 1; i >= 0; i--) result = over(layers[i], result);
    return result;
  };
  const opacity = (element) => {
    let value = 1;
    for (let node = element; node && node.nodeType === 1; node = node.parentElement) {
      value *= Number(getComputedStyle(node).opacity);
    }
    return value;
  };
  const luminance = (c) => {
    const ch = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b);
  };
  const hidden = (element) => {
    for (let node = element; node && node.nodeType === 1; node = node.parentElement) {
      const parent = node.parentElement;
      if (parent && parent.tagName === "DETAILS" && !parent.open && node.tagName !== "SUMMARY") return true;
    }
    return !element.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  };
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    const value = text.nodeValue.replace(/\s+/g, " ").trim();
    const element = text.parentElement;
    if (!value || !element || ["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "OPTION"].includes(element.tagName)) continue;
    if (hidden(element)) continue;
    // WCAG exempts inactive controls (a button disabled while its form posts).
    if (element.closest(":disabled, [aria-disabled=true]")) continue;
    const range = document.createRange();
    range.selectNodeContents(text);
    const rects = [...range.getClientRects()].filter((r) => r.width > 1 && r.height > 1 && r.right > 0 && r.bottom > 0);
    if (!rects.length) continue;
    const style = getComputedStyle(element);
    const colour = parse(style.color);
    const behind = background(element);
    let ratio = null;
    if (colour && behind) {
      const shown = over({...colour, a: colour.a * opacity(element)}, behind);
      const [light, dark] = [luminance(shown), luminance(behind)].sort((x, y) => y - x);
      ratio = (light + 0.05) / (dark + 0.05);
    }
    const size = parseFloat(style.fontSize);
    const bold = Number(style.fontWeight) >= 700;
    found.push({
      text: value,
      // What people wrote or pushed (a workspace's documents, their comments): theirs, not ours.
      content: !!element.closest(".prose, .doc__body, .doc, .thread__text"),
      ratio,
      large: size >= 24 || (bold && size >= 18.66),
      where: element.tagName.toLowerCase() + (element.className && typeof element.className === "string" ? "." + element.className.trim().split(/\s+/).join(".") : ""),
      color: style.color,
    });
  }
  return found;
}
"""

# The project's internal names and patterns, none of which a person should read.
DENIED = {
    "a built-in tool's name": re.compile(r"\bglove_[a-z_]+"),
    "a mesh tag": re.compile(r"\bmesh:[a-z]"),
    "an internal tag or tool name": re.compile(
        r"\b(restock_watch|add_to_cart|view_cart|check_stock|get_current_time|"
        r"inbox_push|inbox_read|mesh_send_message|invoke_skill|approval_pending)\b"
    ),
    "an id with its prefix": re.compile(
        r"\b(msg|inbox|turn|call|toolu|appr|entry)_[A-Za-z0-9]{4,}"
    ),
    "a uuid": re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
    "a hex id": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"),
    "raw JSON": re.compile(r"[{\[]\s*\"[^\"]+\"\s*:|\"\s*:\s*[{\[\"0-9]"),
    "an ISO timestamp": re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}"),
    "raw milliseconds": re.compile(r"\b\d+\s?ms\b", re.I),
    "a repeated word": re.compile(r"\b(\w{3,})\s+\1\b", re.I),
}
# Whole texts that are an agent's internal name (its display name is what people read).
AGENT_IDS = {"coffee", "roastery", "chat-glove", "chat-glove-roastery"}


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def audit(page: Page, where: str, *, names: bool = True, contrast: bool = True) -> list[Problem]:
    """The problems of what `page` shows now: internal names (`names`) and text below AA
    contrast (4.5:1, 3:1 for large text)."""
    problems: list[Problem] = []
    for text in page.evaluate(TEXTS_JS):
        value = text["text"]
        if names and not text["content"]:
            for reason, pattern in DENIED.items():
                match = pattern.search(value)
                if match:
                    problems.append(Problem(where, f"{reason} {match[0]!r} in {value[:120]!r}"))
        if names and value.strip().lower().split(" ·")[0] in AGENT_IDS:
            problems.append(Problem(where, f"an agent's internal name {value!r}"))
        ratio = text["ratio"]
        needed = 3.0 if text["large"] else 4.5
        if contrast and ratio is not None and ratio < needed:
            problems.append(
                Problem(
                    where,
                    f"contrast {ratio:.2f}:1 < {needed}:1 for {value[:60]!r} "
                    f"({text['where']}, {text['color']})",
                )
            )
    return problems
