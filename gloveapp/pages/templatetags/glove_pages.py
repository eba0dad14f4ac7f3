"""Filters for what people read on the pages: JSON as JSON, times in plain words."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from gloveapp.agents import labels
from gloveapp.conversations.access import may_see_tool_data

register = template.Library()


@register.filter
def agent_title(agent_name: str | None) -> str:
    """An agent by its title ("Brew coffee shop"), never its internal name (`coffee`)."""
    return labels.agent_title(agent_name)


@register.filter
def as_json(value: Any) -> str:
    """Indented JSON (`false`, `null`, double quotes), not Python's repr of a dict."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


@register.filter
def sees_tool_data(user: Any) -> bool:
    """May this user read a tool call's raw JSON (`access.may_see_tool_data`)?"""
    return may_see_tool_data(user)


@register.filter
def ago(moment: datetime | None) -> str:
    """ "just now" under a minute (timesince would say "0 minutes"), else "5 minutes ago"."""
    if moment is None:
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment)} ago"


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{_words(key)} {_plain(cell)}" for key, cell in value.items())
    if isinstance(value, list):
        return "; ".join(_plain(item) for item in value)
    return str(value).replace("_", " ") if isinstance(value, str) else str(value)


def _words(key: Any) -> str:
    return str(key).replace("_", " ")


@register.filter
def readable(value: Any) -> list[tuple[str, str]]:
    """A call's arguments as (label, plain words) pairs, for a page a customer reads: a
    tool without a summary still shows no JSON there (staff get the JSON one click away)."""
    if not isinstance(value, dict):
        return [("", _plain(value))] if value not in (None, "") else []
    return [(_words(key).capitalize(), _plain(cell)) for key, cell in value.items()]


@register.simple_tag
def when(moment: datetime | str | None) -> str:
    """A `<time>` people read: "28 Nov 2026, 06:40 UTC" on the server (no microseconds),
    turned into the reader's own time zone by `glove/local_time.js`."""
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            return moment
    if moment is None:
        return ""
    utc = moment.astimezone(UTC) if timezone.is_aware(moment) else moment
    return format_html(
        '<time datetime="{}" data-local-time>{}</time>',
        utc.isoformat(timespec="seconds"),
        f"{utc:%-d %b %Y, %H:%M} UTC",
    )
