"""`GET /metrics`: every process's Prometheus metrics, and the gauges read from the database.

Private by default: with GLOVE_METRICS_TOKEN unset the route answers 404, as if it did not
exist; with it set, a scraper sends `Authorization: Bearer <token>` (a missing or wrong one:
401). Whichever server process answers adds up every process's metrics (the multiprocess
folder `make serve-prod` sets), so a scrape through the proxy tells the whole stack. The
gauges of `catalogue.SCRAPED` are a few indexed counts read at each scrape.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count, Min, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.budgets.selectors import budgets_spend_all
from gloveapp.observe import metrics
from gloveapp.observe.catalogue import BY_NAME
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.versions.selectors import published_budget_rules
from mesh.models import MeshRefusal

logger = logging.getLogger(__name__)


def _authorized(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token)


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.GLOVE_METRICS_TOKEN
    if not token:
        raise Http404("metrics are off (GLOVE_METRICS_TOKEN is not set)")
    if not _authorized(request, token):
        response = HttpResponse(
            "401 Unauthorized: the Authorization header must be 'Bearer <GLOVE_METRICS_TOKEN>'.\n",
            status=401,
            content_type="text/plain; charset=utf-8",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = metrics.render([DatabaseGauges()])
    return HttpResponse(body, content_type=content_type)


def _age(moment: Any, now: Any) -> float:
    return max((now - moment).total_seconds(), 0.0) if moment is not None else 0.0


class DatabaseGauges:
    """The gauges read from the database at scrape time (a failure skips them, logged: the
    processes' own metrics are still answered)."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        try:
            now = timezone.now()
            unfinished = (Turn.Status.QUEUED, Turn.Status.RUNNING, Turn.Status.WAITING)
            turns = Turn.objects.filter(status__in=unfinished)
            counts = turns.aggregate(
                queued=Count("id", filter=Q(status=Turn.Status.QUEUED)),
                running=Count("id", filter=Q(status=Turn.Status.RUNNING)),
                waiting=Count("id", filter=Q(status=Turn.Status.WAITING)),
                oldest=Min("created_at", filter=Q(status=Turn.Status.QUEUED)),
            )
            approvals = ApprovalRequest.objects.filter(
                status=ApprovalRequest.Status.OPEN
            ).aggregate(count=Count("id"), oldest=Min("created_at"))
            prompts = TurnSlot.objects.filter(
                status=TurnSlot.Status.OPEN,
                waits_for_answer=True,
                # A prompt of a running turn, or of one parked on it (`waiting`).
                turn__status__in=(Turn.Status.RUNNING, Turn.Status.WAITING),
            ).aggregate(count=Count("id"), oldest=Min("created_at"))
            refusals = list(MeshRefusal.objects.values_list("reason", "count"))
            spends = budgets_spend_all(versions=published_budget_rules())
        except Exception:
            logger.exception("the metrics read from the database are left out of this scrape")
            return
        for name, value in (
            ("glove_turns_queued", counts["queued"]),
            ("glove_turns_running", counts["running"]),
            ("glove_turns_waiting", counts["waiting"]),
            ("glove_oldest_queued_turn_age_seconds", _age(counts["oldest"], now)),
        ):
            yield GaugeMetricFamily(name, BY_NAME[name].meaning, value=value)
        waiting = GaugeMetricFamily(
            "glove_waiting_on_person", BY_NAME["glove_waiting_on_person"].meaning, labels=["kind"]
        )
        oldest = GaugeMetricFamily(
            "glove_waiting_on_person_oldest_age_seconds",
            BY_NAME["glove_waiting_on_person_oldest_age_seconds"].meaning,
            labels=["kind"],
        )
        for kind, row in (("approval", approvals), ("prompt", prompts)):
            waiting.add_metric([kind], row["count"])
            oldest.add_metric([kind], _age(row["oldest"], now))
        yield waiting
        yield oldest
        refused = CounterMetricFamily(
            "glove_mesh_refusals", BY_NAME["glove_mesh_refusals"].meaning, labels=["reason"]
        )
        for reason, count in refusals:
            refused.add_metric([reason], count)
        yield refused
        # Per budget id only (bounded: the budgets staff and the settings declare, no user).
        spend = GaugeMetricFamily(
            "glove_budget_spend_usd", BY_NAME["glove_budget_spend_usd"].meaning, labels=["budget"]
        )
        remaining = GaugeMetricFamily(
            "glove_budget_remaining_usd",
            BY_NAME["glove_budget_remaining_usd"].meaning,
            labels=["budget"],
        )
        for found in spends:
            spend.add_metric([found.rule.key], float(found.used_usd))
            if found.remaining_usd is not None:
                remaining.add_metric([found.rule.key], float(found.remaining_usd))
        yield spend
        yield remaining
