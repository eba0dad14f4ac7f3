"""`{% inbox_unread_badge %}`: the unread count beside "Inbox" in the site navigation."""

from __future__ import annotations

from django import template

from inbox.workspaces.selectors import BADGE_CAP, unread_count

register = template.Library()


@register.inclusion_tag("inbox/_badge.html", takes_context=True)
def inbox_unread_badge(context: dict) -> dict:
    request = context.get("request")
    user = getattr(request, "user", None)
    count = unread_count(user)
    return {"count": count, "label": f"{BADGE_CAP - 1}+" if count >= BADGE_CAP else str(count)}
