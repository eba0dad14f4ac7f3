"""HTTP RED metrics: every request Django answers is counted by route, method and status
class, and timed (`glove_http_requests_total`, `glove_http_request_duration_seconds`), so a
request rate, an error ratio and a latency by route can be read and alerted on.

The route is the URL pattern that matched (`request.resolver_match.route`), never the
path: the labels stay a bounded set whatever callers send (ids, forged paths), and carry
nothing of theirs. A path no pattern matches is `(unmatched)`; a method outside HTTP's own
is `OTHER`. First in MIDDLEWARE, so every answer is seen, the other middleware's included
(a refused Host, a 500 turned into a response). The event stream and `/mcp/` are served
beside Django (`gloveapp.asgi`) and are not counted here.
"""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from gloveapp.observe import metrics

UNMATCHED = "(unmatched)"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _record(request: Any, response: Any, started: float) -> None:
    match = getattr(request, "resolver_match", None)
    route = (match.route or match.view_name or UNMATCHED) if match is not None else UNMATCHED
    method = request.method if request.method in METHODS else "OTHER"
    metrics.http_request(
        route=route,
        method=method,
        status=getattr(response, "status_code", 500),
        duration=time.perf_counter() - started,
    )


class RequestMetricsMiddleware:
    """Count and time each request by its route template (sync and async: no thread hop
    under ASGI)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self._acall(request)
        started = time.perf_counter()
        response = self.get_response(request)
        _record(request, response, started)
        return response

    async def _acall(self, request: Any) -> Any:
        started = time.perf_counter()
        response = await self.get_response(request)
        _record(request, response, started)
        return response
