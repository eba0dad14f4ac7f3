"""Filters for what people read on the pages: JSON as JSON, times in plain words."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def as_json(value: Any) -> str:
    """Indented JSON (`false`, `null`, double quotes), not Python's repr of a dict."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


@register.filter
def ago(moment: datetime | None) -> str:
    """ "just now" under a minute (timesince would say "0 minutes"), else "5 minutes ago"."""
    if moment is None:
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment)} ago"
