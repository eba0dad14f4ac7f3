"""Every Prometheus metric glove-django exports and every span it traces, declared once.

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
# Seconds of an HTTP request, to its response (OpenTelemetry's advised HTTP buckets).
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
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
    # -- HTTP requests (Django's routes): rate, errors and duration by route
    MetricSpec(
        "glove_http_requests",
        "counter",
        "HTTP requests Django answered, by route template (the URL pattern, never the path: "
        "`api/sessions/<str:session_id>/messages`; `(unmatched)` for a path no pattern "
        "matches), method (`OTHER` for an unusual one) and status class (`2xx`...`5xx`). "
        'The error ratio: `status_class="5xx"` over all.',
        ("route", "method", "status_class"),
    ),
    MetricSpec(
        "glove_http_request_duration_seconds",
        "histogram",
        "From a request reaching Django to its response (a streamed body's first part), by "
        "route template and method.",
        ("route", "method"),
        buckets=HTTP_BUCKETS,
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
    # -- handoffs (who answers a chat: conversations.handoff)
    MetricSpec(
        "glove_handoffs",
        "counter",
        "Chats handed to a person, by the way in: `page`, `api`, `tool` (the agent's "
        "`glove_request_human`), `rule` (after failed turns) or `console` (a take-over). "
        "Divided by `glove_turns_started_total`, the agent's handoff rate.",
        (AGENT, "via"),
    ),
    MetricSpec(
        "glove_handoff_time_to_person_seconds",
        "histogram",
        "From a chat entering a group's queue to a person claiming it.",
        (AGENT,),
        buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600),
    ),
    MetricSpec(
        "glove_handoff_hand_backs",
        "counter",
        "Chats a person handed back to the agent.",
        (AGENT,),
    ),
    MetricSpec(
        "glove_handoff_resolved_after_hand_back",
        "counter",
        "Chats resolved after a hand-back: the agent's first turn after a person handed the "
        "chat back ended done (it answered, nobody took the chat again first). Divided by "
        "`glove_handoff_hand_backs_total`, how often a hand-back holds.",
        (AGENT,),
    ),
    # -- budgets (spending limits)
    MetricSpec(
        "glove_budget_limit_reached",
        "counter",
        "Times a call or a turn met a budget's cap, by budget id and what the budget did: "
        "`warn`, `require_person` or `refuse`.",
        ("budget", "action"),
    ),
    MetricSpec(
        "glove_budget_unpriced_refusals",
        "counter",
        "Model calls refused because a budget in dollars applied and the model has no price "
        "in `GLOVE_MODEL_PRICES` (a budget fails closed; a free model is priced at 0).",
        ("budget",),
    ),
    # -- tools
    MetricSpec(
        "glove_tool_calls",
        "counter",
        "Tool calls by tool and outcome: `success`, `error` or `aborted`. `tool` is one of "
        "the agent's tools, `(unknown)` for a name the model made up (never its text).",
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
        "glove_turns_waiting",
        "gauge",
        "Turns parked on a person now (an approval, a prompt): they hold no worker.",
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
        "glove_budget_spend_usd",
        "gauge",
        "Dollars spent and reserved (calls in flight) in each budget's current window, summed "
        "over its subjects (each user of a per-user budget).",
        ("budget",),
        scraped=True,
    ),
    MetricSpec(
        "glove_budget_remaining_usd",
        "gauge",
        "Dollars left in each budget's current window before its cap: for a budget of one "
        "subject (or everyone), its cap less its spend; for a budget of each subject apart, "
        "the least any of its subjects has left this window.",
        ("budget",),
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


# -- spans (OpenTelemetry) ----------------------------------------------------------------------
@dataclass(frozen=True)
class SpanSpec:
    name: str  # the span's name; `{x}` is filled in (the agent, the model, the tool)
    meaning: str
    attributes: tuple[tuple[str, str], ...]


TURN_ATTRIBUTES = (
    ("gen_ai.conversation.id", "The session's global id."),
    ("glove.turn.id", "The turn's id (the `Turn` row)."),
    ("glove.turn.attempt", "Which attempt of the turn this is (above 1: a retry)."),
    ("glove.worker.id", "The turn worker that ran the attempt."),
)

SPANS: tuple[SpanSpec, ...] = (
    SpanSpec(
        "invoke_agent {agent}",
        "One attempt of a chat turn on a turn worker (GenAI conventions). Its parent is the "
        "HTTP request that posted the message (its trace context is stored with the turn), "
        "so the request and the turn it started are one trace across processes.",
        (
            ("gen_ai.operation.name", "`invoke_agent`."),
            ("gen_ai.agent.name", "The agent (`GLOVE_AGENTS`)."),
            *TURN_ATTRIBUTES,
            ("glove.turn.status", "How the attempt ended: `done`, `failed`, `cancelled`."),
        ),
    ),
    SpanSpec(
        "invoke_agent {subagent}",
        "A delegation to a subagent, nested under the `invoke_agent` of the turn that "
        "delegated it; the subagent's `chat` and `execute_tool` spans are under it.",
        (
            ("gen_ai.operation.name", "`invoke_agent`."),
            ("gen_ai.agent.name", "The subagent."),
            ("gen_ai.conversation.id", "The subagent's own session."),
            ("glove.subagent.depth", "How deep it is nested (1: delegated by the chat's agent)."),
        ),
    ),
    SpanSpec(
        "chat {model}",
        "One model call (GenAI conventions), a child of `invoke_agent`, or of "
        "`replay.conversation` for a replay's calls (the replayed version's and its judge's). "
        "Prompt and completion text are never recorded.",
        (
            ("gen_ai.operation.name", "`chat`."),
            ("gen_ai.provider.name", "The provider part of the model spec (`anthropic`...)."),
            ("gen_ai.request.model", "The model the adapter reports."),
            ("gen_ai.usage.input_tokens", "Input tokens, as stored with the reply."),
            ("gen_ai.usage.output_tokens", "Output tokens."),
            ("gen_ai.usage.cache_read.input_tokens", "Input tokens read from the cache."),
            ("gen_ai.usage.cache_creation.input_tokens", "Input tokens written to the cache."),
            ("gen_ai.response.finish_reasons", "Why the model stopped, as one-item list."),
            ("error.type", "The exception's class when the call failed."),
        ),
    ),
    SpanSpec(
        "execute_tool {tool}",
        "One tool call (GenAI conventions), a child of `invoke_agent`, timed by the runtime.",
        (
            ("gen_ai.operation.name", "`execute_tool`."),
            ("gen_ai.tool.name", "The tool."),
            ("gen_ai.tool.call.id", "The model's id for the call."),
            ("glove.tool.outcome", "`success`, `error` or `aborted`."),
            ("error.type", "`tool_error` when the tool answered with an error."),
        ),
    ),
    SpanSpec(
        "glove.wait {kind}",
        "A wait on a person: a permission prompt, an approval or a display slot that waits "
        "for an answer, from the prompt's first push to its close, a child of the "
        "`invoke_agent` of the attempt that closed it (a turn parked on a person, or taken "
        "over from a dead worker, closes it in a later attempt; the wait still starts at the "
        "first push); or an inbox item (`glove.wait inbox`), from its post to its "
        "resolution, a child of the `invoke_agent` of the turn that consumed it, with a span "
        "link to the resolution's `glove.inbox.resolve` (or, for a mesh message, to the "
        "sender's `glove.mesh.send`) in whichever process made it.",
        (
            (
                "glove.wait.kind",
                "The prompt's renderer (`permission_request`, `approval_request`, a slot's "
                "renderer such as `checkout`) or `inbox`.",
            ),
            ("glove.wait.outcome", "How it closed: `resolved`, `rejected`, `expired`."),
            ("glove.wait.seconds", "How long it waited."),
            ("gen_ai.tool.name", "The tool that asked (prompts and slots)."),
            (
                "glove.wait.decider",
                "Who answered: the approval's decider, the person who answered the prompt or "
                "slot, the inbox item's resolver (a username; empty: expiry, a webhook...).",
            ),
            (
                "glove.wait.channel",
                "Through which channel: an approval's (`page`, `admin`, `rest`, `webhook`, "
                "`email`, `expiry`, `python`), a prompt's (`page`, `rest`), an inbox item's "
                "`resolved_by` (`user`, `webhook`, `command`, `api`, `mesh`, `expiry`, `agent`).",
            ),
            ("glove.wait.decision", "The decision (`approve`, `reject`, ...), when one was taken."),
            ("glove.inbox.item_id", "The inbox item (inbox waits)."),
            ("glove.inbox.tag", "The inbox item's tag (inbox waits)."),
        ),
    ),
    SpanSpec(
        "glove.inbox.resolve",
        "An inbox item's resolution, in the process that resolved it (the admin's or the "
        "API's request, a webhook, `manage.py inbox resolve`, expiry): a child of the "
        "request's span, or a trace of its own. Its trace context is stored with the item, "
        "and the turn that consumes the item links its `glove.wait inbox` span to it.",
        (
            ("glove.inbox.item_id", "The item."),
            ("glove.wait.channel", "Its `resolved_by`."),
            ("glove.wait.decider", "The resolving user's username (empty when none)."),
            ("glove.wait.decision", "The decision, when the item declared decisions."),
        ),
    ),
    SpanSpec(
        "glove.mesh.send",
        "A mesh message sent (or broadcast) by an agent's tool, a child of `invoke_agent` (beside "
        "the `execute_tool` span of the tool that sent it).",
        (
            ("glove.mesh.message_id", "The message's id."),
            ("glove.mesh.from", "The sending agent's mesh id."),
            ("glove.mesh.to", "The recipient's mesh id (`*`: a broadcast)."),
            ("glove.mesh.blocking", "Whether the sender waits for an answer."),
            ("glove.mesh.outcome", "`sent`, or `failed` (refused or unreachable)."),
        ),
    ),
    SpanSpec(
        "replay.batch",
        "One batch of a replay run (`replay_agent`, or a task on a turn worker): a child of "
        "the request that started it, or a trace of its own.",
        (
            ("glove.replay.run", "The run (`ReplayRun`)."),
            ("glove.replay.size", "How many conversations the batch replays."),
            ("gen_ai.agent.name", "The agent replayed."),
        ),
    ),
    SpanSpec(
        "replay.conversation",
        "One recorded conversation replayed against the run's version, a child of "
        "`replay.batch`; its model calls and its judge's are `chat` spans under it.",
        (("glove.session.id", "The recorded session."),),
    ),
    SpanSpec(
        "glove.retry",
        "A turn claimed again after its worker died or stalled past its lease, a child of the "
        "new attempt's `invoke_agent`.",
        (
            ("glove.turn.attempt", "The new attempt's number."),
            ("glove.retry.previous_worker", "The worker that ran the attempt before."),
        ),
    ),
)


def spans_reference_markdown() -> str:
    """The spans reference: one table per span."""
    out: list[str] = []
    for spec in SPANS:
        out += [f"### `{spec.name}`", "", spec.meaning, ""]
        out += ["| attribute | meaning |", "| --- | --- |"]
        out += [f"| `{name}` | {meaning} |" for name, meaning in spec.attributes]
        out.append("")
    return "\n".join(out)
