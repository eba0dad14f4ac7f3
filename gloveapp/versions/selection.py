"""Which recorded conversations a replay runs: a list of ids, a sample, or a saved admin
filter (the query string of the sessions' admin list, as staff bookmark it:
`agent_name=coffee&q=refund`), read through that list's own filters and search, so a
filter means in a replay what it means on the page."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.http import HttpRequest, QueryDict

from gloveapp.conversations.models import Session
from gloveapp.lib.admin import usable
from gloveapp.versions.runs import MAX_CONVERSATIONS


class SelectionInvalid(ValueError):
    pass


def sessions_from_admin_filter(query: str, *, user: Any = None, limit: int = 1000) -> list[str]:
    """The ids of the sessions the admin's list shows for `query` (newest first, at most
    `limit`), as `user` would see them (a superuser when none is given)."""
    model_admin = admin.site._registry.get(Session)
    if model_admin is None:
        raise SelectionInvalid("the sessions' admin is not installed")
    if user is None:
        user = get_user_model().objects.filter(is_superuser=True, is_active=True).first()
        if user is None:
            raise SelectionInvalid("a saved filter is read as a staff member: name one (--as)")
    params = QueryDict(query.lstrip("?"))
    if not all(usable(value) for _, values in params.lists() for value in values):
        # What the list itself refuses with a 400, before any query sees it.
        raise SelectionInvalid("the filter has a NUL character or a value too long")
    request = HttpRequest()
    request.method = "GET"
    request.GET = params
    request.user = user
    request.META["SERVER_NAME"] = "replay"
    request.META["SERVER_PORT"] = "80"
    try:
        changelist = model_admin.get_changelist_instance(request)
    except Exception as error:  # IncorrectLookupParameters, a filter's own refusal
        raise SelectionInvalid(f"the filter {query!r} is not one the admin's list takes") from error
    try:
        with transaction.atomic():  # a refusal of the database stays in its savepoint
            return list(
                changelist.get_queryset(request).values_list("pk", flat=True)[
                    : min(limit, MAX_CONVERSATIONS)
                ]
            )
    except DatabaseError as error:  # a value its column cannot hold
        raise SelectionInvalid(
            f"the filter {query!r} does not fit the sessions' columns"
        ) from error


def parse_ids(text: str) -> list[str]:
    """Session ids from a comma- or space-separated list (what no id can be is left out)."""
    return [part for part in text.replace(",", " ").split() if usable(part)]
