"""The `Link: <...>; rel="next"` header of a keyset-paged list, built one way for every list."""

from __future__ import annotations

from typing import Any

from gloveapp.lib.paging import Cursor


def link_next(response: Any, request: Any, cursor: Cursor | None, *, listed: str) -> Any:
    """Name the next page on `response` (the same query, `cursor` signed for the list named
    `listed`) when there is one; returns the response."""
    if cursor is not None:
        params = request.query_params.copy()
        params["cursor"] = cursor.encode(listed)
        url = request.build_absolute_uri(f"{request.path}?{params.urlencode()}")
        response["Link"] = f'<{url}>; rel="next"'
    return response
