"""Every Prometheus metric glove-django exports, declared once: name, kind, labels, meaning.

`gloveapp.observe.metrics` builds the client library's objects from this list, the `/metrics`
view adds the gauges read from the database at scrape time (`SCRAPED`), and the reference
(docs/reference/metrics.md) is generated from the same list when the docs are built, so the
table cannot drift from the code.

Names follow Prometheus' conventions (snake case, base units, `_total` on counters, `_seconds`
on durations). Where OpenTelemetry's GenAI semantic conventions define a metric, its
Prometheus form is used (`gen_ai.client.operation.duration` -> `gen_ai_client_operation_
duration_seconds`, attributes as labels with dots turned into underscores).

Django-free: the turn worker, the servers and the docs build import it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Seconds: a turn runs from well under a second (the demo model) to minutes (tools, a slow
# model); a model call from tens of milliseconds to a minute.
TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640)
CALL_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96)
QUEUE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# The GenAI conventions' advised buckets for gen_ai.client.token.usage.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)


@dataclass(frozen=True)
class MetricSpec:
    name: str  # the exported name (a counter's without its `_total`, as the client adds it)
    kind: str  # counter | histogram | gauge
    meaning: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    # Gauges kept by the processes: how the multiprocess collector combines them.
    multiprocess_mode: str = ""
    # The OpenTelemetry metric this is the Prometheus form of, if any.
    otel: str = ""
    # Read from the database by the `/metrics` view at scrape time, not kept by a process.
    scraped: bool = False

    @property
    def exported(self) -> str:
        return f"{self.name}_total" if self.kind == "counter" else self.name


AGENT = "gen_ai_agent_name"
MODEL = "gen_ai_request_model"
PROVIDER = "gen_ai_provider_name"
OPERATION = "gen_ai_operation_name"
TOKEN_TYPE = "gen_ai_token_type"

METRICS: tuple[MetricSpec, ...] = (
    # -- turns (the turn workers)
    MetricSpec(
        "glove_turns_started",
        "counter",
        "Turns a worker claimed and began (a retry counts again, and in "
        "`glove_turns_retried_total`).",
        (AGENT,),
    ),
    MetricSpec(
        "glove_turns_finished",
        "counter",
        "Turns that ended, by how: `done`, `failed` (the turn's error was shown to the person) "
        "or `cancelled` (stopped).",
        (AGENT, "status"),
    ),
    MetricSpec(
        "glove_turns_retried",
        "counter",
        "Turns claimed again after their worker died or stalled past its lease.",
        (AGENT,),
    ),
    MetricSpec(
        "glove_turn_duration_seconds",
        "histogram",
        "From a worker's claim to the turn's end, by how it ended.",
        (AGENT, "status"),
        buckets=TURN_BUCKETS,
    ),
    MetricSpec(
        "glove_turn_queue_wait_seconds",
        "histogram",
        "From the message's post to a worker's first claim of its turn.",
        (AGENT,),
        buckets=QUEUE_BUCKETS,
    ),
    # -- model calls
    MetricSpec(
        "gen_ai_client_operation_duration_seconds",
        "histogram",
        "One model call's duration (GenAI conventions; `error_type` empty when it answered).",
        (OPERATION, PROVIDER, MODEL, AGENT, "error_type"),
        buckets=CALL_BUCKETS,
        otel="gen_ai.client.operation.duration",
    ),
    MetricSpec(
        "gen_ai_client_token_usage",
        "histogram",
        "Tokens of one model call, `input` or `output` (GenAI conventions); cache tokens are "
        "in `glove_model_tokens_total`.",
        (OPERATION, PROVIDER, MODEL, AGENT, TOKEN_TYPE),
        buckets=TOKEN_BUCKETS,
        otel="gen_ai.client.token.usage",
    ),
    MetricSpec(
        "glove_model_tokens",
        "counter",
        "Tokens by agent, model and type: `input`, `output`, `cache_read`, `cache_write`.",
        (AGENT, MODEL, TOKEN_TYPE),
    ),
    MetricSpec(
        "glove_model_cost_usd",
        "counter",
        "What the model calls cost in US dollars, from the price table (`GLOVE_MODEL_PRICES`); "
        "calls of a model without a price are counted in `glove_model_calls_unpriced_total` "
        "instead, never as free.",
        (AGENT, MODEL),
    ),
    MetricSpec(
        "glove_model_calls_unpriced",
        "counter",
        "Model calls whose model has no price in `GLOVE_MODEL_PRICES` (their cost is unknown).",
        (AGENT, MODEL),
    ),
    # -- tools
    MetricSpec(
        "glove_tool_calls",
        "counter",
        "Tool calls by tool and outcome: `success`, `error` or `aborted`.",
        (AGENT, "tool", "outcome"),
    ),
    MetricSpec(
        "glove_tool_call_duration_seconds",
        "histogram",
        "One tool call's duration, waits on a person included.",
        (AGENT, "tool"),
        buckets=TURN_BUCKETS,
    ),
    # -- servers
    MetricSpec(
        "glove_websockets_open",
        "gauge",
        "Websockets open now, by stream kind (`session`, `approvals`, `workspace`), over every "
        "server process.",
        ("stream",),
        multiprocess_mode="livesum",
    ),
    MetricSpec(
        "glove_database_reconnects",
        "counter",
        "Times a process found the database back after losing it (each loop reconnects).",
    ),
    MetricSpec(
        "glove_redis_reconnects",
        "counter",
        "Times a process subscribed to Redis again after losing it (the live relay, the mesh).",
        ("component",),
    ),
    # -- read from the database when scraped
    MetricSpec(
        "glove_turns_queued",
        "gauge",
        "Turns waiting for a worker now (the queue's depth).",
        scraped=True,
    ),
    MetricSpec(
        "glove_turns_running",
        "gauge",
        "Turns a worker is running now.",
        scraped=True,
    ),
    MetricSpec(
        "glove_oldest_queued_turn_age_seconds",
        "gauge",
        "How long the oldest queued turn has waited (0 when none): a backed-up queue.",
        scraped=True,
    ),
    MetricSpec(
        "glove_waiting_on_person",
        "gauge",
        "Requests waiting on a person now, by kind: `approval`, `prompt` (a permission prompt "
        "or a display slot that waits for an answer).",
        ("kind",),
        scraped=True,
    ),
    MetricSpec(
        "glove_waiting_on_person_oldest_age_seconds",
        "gauge",
        "How long the oldest open request of each kind has waited on a person.",
        ("kind",),
        scraped=True,
    ),
    MetricSpec(
        "glove_mesh_refusals",
        "counter",
        "Mesh frames refused by the signature guard, by reason (the stored tally every "
        "process adds to).",
        ("reason",),
        scraped=True,
    ),
)

BY_NAME = {spec.name: spec for spec in METRICS}


def reference_markdown() -> str:
    """The metrics reference (docs/reference/metrics.md), one table."""
    rows = [
        "| metric | type | labels | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for spec in METRICS:
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "none"
        meaning = spec.meaning
        if spec.otel:
            meaning += f" Prometheus form of OpenTelemetry's `{spec.otel}`."
        if spec.scraped:
            meaning += " Read from the database at each scrape."
        rows.append(f"| `{spec.exported}` | {spec.kind} | {labels} | {meaning} |")
    return "\n".join(rows)
