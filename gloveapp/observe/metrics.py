"""The process's Prometheus metrics, built from `catalogue.METRICS`, and their exposition.

Every process keeps its own (a turn worker, each granian and uvicorn worker); with
`PROMETHEUS_MULTIPROC_DIR` set (`make serve-prod` sets it, and empties the folder at start)
the client library writes them to files there and `render()` adds up those of every process,
so whichever server process answers a scrape tells the whole. Without it (`make run`, the
tests) a process's own metrics are exported.

Recording is a few dictionary lookups and a locked add (an mmap write in multiprocess mode):
cheap enough for every model and tool call. Django-free.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

from gloveapp.observe.catalogue import METRICS, MetricSpec

_lock = threading.Lock()
_built: dict[str, Any] | None = None
_registry: Any = None


def multiprocess_dir() -> str:
    # The client library reads the same variable when it is imported.
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def _build(spec: MetricSpec, registry: Any) -> Any:
    from prometheus_client import Counter, Gauge, Histogram

    name = spec.name
    if spec.kind == "counter":
        return Counter(name, spec.meaning, spec.labels, registry=registry)
    if spec.kind == "histogram":
        return Histogram(name, spec.meaning, spec.labels, buckets=spec.buckets, registry=registry)
    return Gauge(
        name,
        spec.meaning,
        spec.labels,
        registry=registry,
        multiprocess_mode=spec.multiprocess_mode or "all",
    )


def _metrics() -> dict[str, Any]:
    global _built, _registry
    if _built is None:
        with _lock:
            if _built is None:
                from prometheus_client import CollectorRegistry

                # Single process: a registry of ours (never the client's global one, which
                # also carries its process and platform collectors). Multiprocess: values go
                # to files, read back by `render`.
                _registry = CollectorRegistry(auto_describe=True)
                _built = {
                    spec.name: _build(spec, None if multiprocess_dir() else _registry)
                    for spec in METRICS
                    if not spec.scraped
                }
    return _built


def metric(name: str) -> Any:
    return _metrics()[name]


# Each metric's children by label values, looked up once: the client library's `labels()`
# turns every value into a string and takes a lock on every call. The label values are few
# (agents, models, tools, outcomes), as the metrics' own series are.
_children: dict[tuple[str, ...], Any] = {}


def child(name: str, *labels: str) -> Any:
    """The series of metric `name` with these label values."""
    key = (name, *labels)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric(name).labels(*labels)
    return found


# -- recording ------------------------------------------------------------------------------
def turn_started(*, agent: str, retried: bool, queue_wait: float | None) -> None:
    child("glove_turns_started", agent).inc()
    if retried:
        child("glove_turns_retried", agent).inc()
    elif queue_wait is not None:
        child("glove_turn_queue_wait_seconds", agent).observe(max(queue_wait, 0.0))


def turn_finished(*, agent: str, status: str, duration: float) -> None:
    child("glove_turns_finished", agent, status).inc()
    child("glove_turn_duration_seconds", agent, status).observe(duration)


def model_call(
    *,
    agent: str,
    provider: str,
    model: str,
    duration: float,
    tokens: dict[str, int] | None = None,
    cost_usd: float | None = None,
    error_type: str = "",
    totals: bool = True,
) -> None:
    """One model call; `tokens` by type (input, output, cache_read, cache_write); `cost_usd`
    None when the model has no price. `totals=False`: its tokens and cost are counted by
    `model_usage` when they are stored instead."""
    child(
        "gen_ai_client_operation_duration_seconds", "chat", provider, model, agent, error_type
    ).observe(duration)
    if error_type:
        return
    tokens = tokens or {}
    for kind, count in tokens.items():
        if kind in ("input", "output"):
            child("gen_ai_client_token_usage", "chat", provider, model, agent, kind).observe(count)
    if cost_usd is None:
        child("glove_model_calls_unpriced", agent, model).inc()
    if totals:
        model_usage(agent=agent, model=model, tokens=tokens, cost_usd=cost_usd)


def model_usage(*, agent: str, model: str, tokens: dict[str, int], cost_usd: float | None) -> None:
    """Tokens (and their cost) stored for a model's calls: the totals, which a turn's store
    counts once its write committed, so they are the stored ones (`turns.turn_store`)."""
    for kind, count in tokens.items():
        if count:
            child("glove_model_tokens", agent, model, kind).inc(count)
    if cost_usd:
        child("glove_model_cost_usd", agent, model).inc(cost_usd)


def tool_call(*, agent: str, tool: str, outcome: str, duration: float) -> None:
    child("glove_tool_calls", agent, tool, outcome).inc()
    child("glove_tool_call_duration_seconds", agent, tool).observe(duration)


def handoff_requested(*, agent: str, via: str) -> None:
    child("glove_handoffs", agent, via).inc()


def handoff_claimed(*, agent: str, waited: float) -> None:
    child("glove_handoff_time_to_person_seconds", agent).observe(max(waited, 0.0))


def handoff_handed_back(*, agent: str) -> None:
    child("glove_handoff_hand_backs", agent).inc()


def handoff_resolved_after_hand_back(*, agent: str) -> None:
    child("glove_handoff_resolved_after_hand_back", agent).inc()


def budget_limit_reached(*, budget: str, action: str) -> None:
    child("glove_budget_limit_reached", budget, action).inc()


def budget_unpriced_refusal(*, budget: str) -> None:
    child("glove_budget_unpriced_refusals", budget).inc()


def websocket_opened(stream: str) -> None:
    child("glove_websockets_open", stream).inc()


def websocket_closed(stream: str) -> None:
    child("glove_websockets_open", stream).dec()


def http_request(*, route: str, method: str, status: int, duration: float) -> None:
    """One request Django answered: `route` is its URL pattern (a bounded set)."""
    child("glove_http_requests", route, method, _STATUS_CLASSES.get(status // 100, "other")).inc()
    child("glove_http_request_duration_seconds", route, method).observe(duration)


_STATUS_CLASSES = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}


def database_reconnected() -> None:
    metric("glove_database_reconnects").inc()


def redis_reconnected(component: str) -> None:
    child("glove_redis_reconnects", component).inc()


# -- exposition -----------------------------------------------------------------------------
def render(extra: Iterable[Any] = ()) -> tuple[bytes, str]:
    """The exposition text of every process's metrics plus the `extra` collectors (the
    gauges read from the database), and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    _metrics()
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_Own())
    for collector in extra:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Own:
    """This process's registry as a collector of another registry."""

    def collect(self) -> Iterable[Any]:
        return _registry.collect()
