"""Escaping text for the places it is pasted into: Slack-style mrkdwn and CSV cells.

Anything a model, a customer or a tool wrote (a coffee's name, a reason) may be hostile:
in Slack-style text `<https://evil.example|Approve here>` is a link and three backticks end
a code block; in a spreadsheet a cell starting with `=` is a formula (`=HYPERLINK(…)`).
"""

from __future__ import annotations

from typing import Any

# A backtick in text bound for a code block: the modifier letter grave accent looks the same
# and cannot open or close one.
_SAFE_BACKTICK = "\u02cb"
# OWASP's CSV injection rule: a cell that starts with one of these is read as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def mrkdwn(text: str) -> str:
    """Text for Slack-style mrkdwn: `&`, `<` and `>` escaped as Slack asks (so no link,
    mention or `<!channel>` can be made from it)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mrkdwn_code_block(text: str) -> str:
    """A code block whose content cannot end it early nor make a link."""
    return "```" + mrkdwn(text).replace("`", _SAFE_BACKTICK) + "```"


def csv_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as text: one starting with `=`, `+`, `-`, `@`, a tab or
    a carriage return gets a leading `'` (OWASP); other values are unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(row: Any) -> list[Any]:
    return [csv_cell(value) for value in row]
