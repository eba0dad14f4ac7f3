"""Every environment variable glove-django reads, declared once: name, type, default, meaning.

`gloveapp/settings.py` reads them with `env("NAME")`, which takes the type and the default
from here, and the settings reference (docs/reference/settings.md) is generated from the same
list when the docs are built, so the table cannot drift from the code. A few are read outside
the settings (the model providers, `setup_demo`); `read_by` names where, and
tests/suite/test_settings_declaration.py checks that every name the code reads is declared.

To add a setting: declare it in `DECLARATIONS` below, in its group, then read it in
settings.py with `env("NAME")`.

Django-free on purpose: the settings module imports it before Django is configured.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class Derived:
    """A default computed by settings.py from other settings; `text` says how, for the docs."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Derived({self.text!r})"


@dataclass(frozen=True)
class EnvVar:
    name: str
    # bool | int | float | str | list (comma-separated) | pairs (a=x,b=y) | choice | json
    kind: str
    default: Any
    meaning: str
    group: str
    choices: tuple[str, ...] = ()
    # Where the variable is read when it is not settings.py (the docs say so).
    read_by: str = ""
    # Hide the default in the docs (the development secret key).
    secret: bool = False

    def default_text(self) -> str:
        """The default as the reference shows it."""
        if isinstance(self.default, Derived):
            return self.default.text
        if self.secret or self.default in (None, "", [], {}):
            return "none"
        if self.kind == "bool":
            return "true" if self.default else "false"
        if self.kind == "list":
            return ",".join(self.default)
        if self.kind == "json":
            return json.dumps(self.default)
        return str(self.default)


PUBLIC_URL_DEFAULT = "http://127.0.0.1:8000"

GENERAL = "Django and the web server"
HTTPS = "HTTPS and proxies"
DATABASE = "The database"
MODELS = "Models and agents"
TURNS = "Chat turns and their workers"
LIVE = "Live updates"
INBOX = "The inbox, webhooks and limits"
APPROVALS = "Approvals"
MESH = "The mesh"
WORKSPACE = "The workspace inbox"
RETENTION = "Retention"
LOGINS = "Logins and the demo"
OBSERVE = "Metrics, cost and the turn timeline"
BUDGETS = "Budgets (spending limits)"
VERSIONS = "Agent versions and replay"

# In the order the reference shows them, group by group.
DECLARATIONS: tuple[EnvVar, ...] = (
    # -- Django and the web server
    EnvVar(
        "DEBUG",
        "bool",
        False,
        "Django's debug mode; `make run` sets it to `true`.",
        GENERAL,
    ),
    EnvVar(
        "SECRET_KEY",
        "str",
        "dev-only-insecure-key-change-me",
        "Django's secret key. Required in production: `check --deploy` warns while the "
        "development key is in use (`glove.W001`).",
        GENERAL,
        secret=True,
    ),
    EnvVar(
        "ALLOWED_HOSTS",
        "list",
        ["127.0.0.1", "localhost", "testserver"],
        "Host names the server answers, comma-separated.",
        GENERAL,
    ),
    EnvVar(
        "GLOVE_PASSWORD_HASHERS",
        "list",
        [],
        "Password hashers (dotted paths, comma-separated), the first one for new passwords. "
        "Empty: Django's own list. The test suite sets the MD5 hasher for itself and the "
        "servers it starts, as Django's docs advise for tests; never set it in production.",
        GENERAL,
    ),
    EnvVar(
        "CSRF_TRUSTED_ORIGINS",
        "list",
        [],
        "Origins trusted for unsafe requests (`https://glove.example.com`), comma-separated.",
        GENERAL,
    ),
    EnvVar(
        "GLOVE_SERVER",
        "choice",
        "asgi",
        "Which kind of server this process is; it decides how database connections are "
        "reused. `gloveapp.asgi` sets `asgi`; `gloveapp.wsgi` sets `granian` under granian, "
        "else `wsgi` (gunicorn).",
        GENERAL,
        choices=("asgi", "wsgi", "granian"),
    ),
    EnvVar(
        "HOST",
        "str",
        "127.0.0.1",
        "Where `make run` listens (a make variable too: `make run HOST=0.0.0.0`); "
        "`setup_demo` prints links to it.",
        GENERAL,
        read_by="`make run`, `setup_demo`",
    ),
    EnvVar(
        "PORT",
        "int",
        8000,
        "The port `make run` listens on (it checks the port is free first).",
        GENERAL,
        read_by="`make run`, `setup_demo`",
    ),
    EnvVar(
        "LOG_LEVEL",
        "str",
        "WARNING",
        "The root logger's level.",
        GENERAL,
    ),
    # -- HTTPS and proxies
    EnvVar(
        "GLOVE_HTTPS",
        "bool",
        False,
        "Production over HTTPS: redirects plain HTTP, marks the cookies secure and sends HSTS. "
        "Each part can also be set on its own (below).",
        HTTPS,
    ),
    EnvVar(
        "SECURE_SSL_REDIRECT",
        "bool",
        Derived("`GLOVE_HTTPS`"),
        "Redirect plain HTTP to HTTPS.",
        HTTPS,
    ),
    EnvVar(
        "SESSION_COOKIE_SECURE",
        "bool",
        Derived("`GLOVE_HTTPS`"),
        "Send the session cookie over HTTPS only.",
        HTTPS,
    ),
    EnvVar(
        "CSRF_COOKIE_SECURE",
        "bool",
        Derived("`GLOVE_HTTPS`"),
        "Send the CSRF cookie over HTTPS only.",
        HTTPS,
    ),
    EnvVar(
        "SECURE_HSTS_SECONDS",
        "int",
        Derived("`31536000` (a year) with `GLOVE_HTTPS`, else `0`"),
        "The HSTS header's max-age.",
        HTTPS,
    ),
    EnvVar(
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "bool",
        False,
        "HSTS covers the subdomains too.",
        HTTPS,
    ),
    EnvVar(
        "SECURE_HSTS_PRELOAD",
        "bool",
        False,
        "Ask browsers to preload HSTS.",
        HTTPS,
    ),
    EnvVar(
        "GLOVE_BEHIND_PROXY",
        "bool",
        False,
        "Behind a proxy that always sets `X-Forwarded-Proto` and `X-Forwarded-For` (and "
        'strips a client\'s own): trust them for "is this HTTPS" and for the client address '
        "the login lockout counts.",
        HTTPS,
    ),
    EnvVar(
        "AXES_IP_HEADERS",
        "list",
        Derived("`HTTP_X_FORWARDED_FOR,REMOTE_ADDR` with `GLOVE_BEHIND_PROXY`, else `REMOTE_ADDR`"),
        "Where the login lockout reads the client address from (`request.META` keys, "
        "first found wins).",
        HTTPS,
    ),
    # -- The database
    EnvVar(
        "DATABASE_URL",
        "str",
        Derived("`sqlite:///db.sqlite3` (in the project folder)"),
        "The database, e.g. `postgres://user@host:5432/glove`.",
        DATABASE,
    ),
    EnvVar(
        "DB_CONN_MAX_AGE",
        "int",
        0,
        "Seconds a server thread keeps its database connection. Under gunicorn only: under "
        "ASGI it would leak one per request, under granian one per idle thread that exits; "
        "`glove.E006` and the entry points refuse it there.",
        DATABASE,
    ),
    EnvVar(
        "DB_POOL_SIZE",
        "int",
        Derived("`0`; `10` under an ASGI server and under granian"),
        "PostgreSQL: psycopg's connection pool per process, the way connections are reused "
        "under ASGI and granian. It must exceed the threads that hold a connection at once. "
        "`0` is off.",
        DATABASE,
    ),
    EnvVar(
        "GLOVE_DB_STATEMENT_TIMEOUT_SECONDS",
        "float",
        Derived(
            "`30` in the HTTP servers (`gloveapp.asgi`, `gloveapp.wsgi`) with `DEBUG` off; else `0`"
        ),
        "PostgreSQL: the longest a statement may run (its `statement_timeout`); the server "
        "cancels it past that, so no request, nor a query its client gave up on, holds the "
        "database longer; the request answers 503. `0` is off (management commands and the "
        "turn worker, whose long work is its own, unless set for them).",
        DATABASE,
    ),
    EnvVar(
        "GLOVE_DB_CONNECT_TIMEOUT_SECONDS",
        "float",
        10.0,
        "PostgreSQL: the longest a request waits for a connection (one from the pool, or a new "
        "one's handshake, at least 2 s); past it, 503 with `Retry-After`.",
        DATABASE,
    ),
    EnvVar(
        "GLOVE_DB_WAIT_SECONDS",
        "float",
        Derived("`GLOVE_DB_STATEMENT_TIMEOUT_SECONDS` + 2 when that is on, else `0`"),
        "PostgreSQL: the longest the process waits for a statement's answer before it cuts the "
        "connection: a frozen server, which cancels nothing, answers 503 within it instead of "
        "holding the request. `0` is off.",
        DATABASE,
    ),
    EnvVar(
        "DATABASE_DIRECT_URL",
        "str",
        "",
        "PostgreSQL behind PgBouncer in transaction mode (`DATABASE_URL` names PgBouncer): "
        "the server itself, for the connections that `LISTEN` (the live relay, the turn "
        "worker), which a transaction pooler cannot carry.",
        DATABASE,
    ),
    EnvVar(
        "DATABASE_REPLICA_URLS",
        "list",
        [],
        "PostgreSQL streaming replicas of `DATABASE_URL`, comma-separated: reads that "
        "tolerate lag (admin lists, the decided approvals' history) go to them; a chat's "
        "reads, the worker's and anything right after its reader's own write stay on the "
        "primary (docs/explanation/scale.md).",
        DATABASE,
    ),
    EnvVar(
        "GLOVE_REPLICA_PIN_SECONDS",
        "float",
        5.0,
        "After a person's write (POST, PUT, PATCH, DELETE), how long their reads stay on the "
        "primary, so a list they go back to shows their change while a replica lags.",
        DATABASE,
    ),
    EnvVar(
        "GLOVE_PREPARED_STATEMENTS",
        "bool",
        Derived("`true`; `false` when `DATABASE_DIRECT_URL` is set (behind PgBouncer)"),
        "PostgreSQL: the hot statements (appends, history reads) are prepared once per "
        "connection. Turn off behind a transaction-pooling PgBouncer older than 1.21.",
        DATABASE,
    ),
    EnvVar(
        "GLOVE_EARLY_LOCK_RELEASE",
        "bool",
        True,
        "PostgreSQL: an append outside a transaction lets go of its session's lock once its "
        "rows are written, and answers once they reach the disk. Off: one session's appends "
        "also wait for each other's disk flushes.",
        DATABASE,
    ),
    EnvVar(
        "GLOVE_TOKEN_CACHE_SECONDS",
        "float",
        5.0,
        "How long a process trusts an API token it has checked (`0`: every request reads it).",
        DATABASE,
    ),
    # -- Models and agents
    EnvVar(
        "GLOVE_MODEL",
        "str",
        "",
        "The model the agents talk to: `anthropic:<model>`, `openai:<model>`, "
        "`openrouter:<model>`, `ollama:<model>`, `scripted` or `demo`. Empty: the offline "
        "demo model.",
        MODELS,
    ),
    EnvVar(
        "ANTHROPIC_API_KEY",
        "str",
        None,
        "The key for `anthropic:` models.",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "ANTHROPIC_BASE_URL",
        "str",
        Derived("Anthropic's API"),
        "Another Anthropic-compatible endpoint.",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "OPENAI_API_KEY",
        "str",
        None,
        "The key for `openai:` models.",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "OPENAI_BASE_URL",
        "str",
        Derived("OpenAI's API"),
        "Any OpenAI-compatible server for `openai:` models (vLLM, LM Studio, ...).",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "OPENROUTER_API_KEY",
        "str",
        None,
        "The key for `openrouter:` models.",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "OPENROUTER_BASE_URL",
        "str",
        "https://openrouter.ai/api/v1",
        "OpenRouter's endpoint.",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "OLLAMA_BASE_URL",
        "str",
        "http://127.0.0.1:11434/v1",
        "The Ollama server for `ollama:` models.",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "OLLAMA_API_KEY",
        "str",
        Derived("`ollama` (Ollama ignores it)"),
        "The key sent to the Ollama server.",
        MODELS,
        read_by="the model providers",
    ),
    EnvVar(
        "GLOVE_DEFAULT_AGENT",
        "str",
        "coffee",
        "The agent of new chats; agents are listed in the `GLOVE_AGENTS` setting.",
        MODELS,
    ),
    EnvVar(
        "GLOVE_TOOL_RESULT_MAX_BYTES",
        "int",
        65536,
        "The cap on one tool result (local or MCP; data, message and render data as UTF-8 "
        "JSON). Past it the model reads the head with a notice, the page shows the head, and "
        "the whole is kept for its owner and staff to download (docs/howto/write-a-tool.md).",
        MODELS,
    ),
    EnvVar(
        "GLOVE_TOOL_RESULT_KEEP_MAX_BYTES",
        "int",
        64 * 1024 * 1024,
        "The largest whole tool result kept for download; a larger one keeps only its head.",
        MODELS,
    ),
    EnvVar(
        "GLOVE_MCP_TOOLS_TTL_SECONDS",
        "float",
        300.0,
        "How long a worker keeps an MCP server's list of tools before listing it again "
        "(agents' `mcp_servers`, docs/howto/agents.md).",
        MODELS,
    ),
    EnvVar(
        "GLOVE_SUBAGENT_MAX_DEPTH",
        "int",
        2,
        "How deep delegation to subagents may nest: `1` lets a chat's agent delegate but "
        "not its subagents.",
        MODELS,
    ),
    EnvVar(
        "GLOVE_SUBAGENT_MAX_TURNS",
        "int",
        20,
        "The most model calls one subagent run may make.",
        MODELS,
    ),
    EnvVar(
        "GLOVE_SUBAGENT_MAX_TOKENS",
        "int",
        200000,
        "The most tokens (in + out) one subagent run may spend; past it the run stops and "
        "the parent reads an error.",
        MODELS,
    ),
    # -- Chat turns and their workers
    EnvVar(
        "GLOVE_TASKS_BACKEND",
        "choice",
        "db",
        "Where chat turns queue: `db` (django-tasks-db, in this database, worked by "
        "`manage.py turn_worker`) or `rq` (RQ on `REDIS_URL`, for many workers).",
        TURNS,
        choices=("db", "rq"),
    ),
    EnvVar(
        "REDIS_URL",
        "str",
        "",
        "Redis for the channel layer (channels_redis) and instant relay wake-ups, the `rq` "
        "turn queue, the `redis` mesh transport and the shared cache (rate limits, rendered "
        "docs). Empty: the in-memory channel layer and the database's `glove_cache` table.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURNS_PER_USER_PER_MINUTE",
        "int",
        30,
        "Turns one user may start per calendar minute (chat pages, the REST start, "
        "`runner.submit_message`, mesh wake-ups of an owned peer); 429 beyond. It is the "
        "budget `turns-per-minute` (counted exactly under concurrency, docs/howto/budgets.md); "
        "`0` removes it.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_CHAT_RATE",
        "str",
        Derived("`GLOVE_TURNS_PER_USER_PER_MINUTE`/min"),
        "DRF throttle rate of `POST /api/chat` per user (whose turns run in the client).",
        TURNS,
    ),
    EnvVar(
        "GLOVE_LAZY_SESSIONS",
        "bool",
        False,
        "The REST remote store treats a session id its owner never used as an empty session "
        "of theirs: a read answers the empty defaults (nothing is created) and the first write "
        "creates it, as Glove's own stores do, so glove-react's default `useGlove` (a session "
        "id made up in the browser, read at once) works unchanged. Off: such an id is 404 "
        "until `POST /api/sessions` creates it (the spec's Decision 6).",
        INBOX,
    ),
    EnvVar(
        "GLOVE_HISTORY_UNPAGED_MAX",
        "int",
        None,
        "A cap, if the operator wants one, on the messages `GET /api/sessions/<id>/messages` "
        "returns without paging (Glove's store GET); unset or 0: none, the whole history is "
        "served, a long one streamed in bounded memory, as Glove's clients read it. Past the "
        "cap it answers 400 `history_too_long`, naming `limit` with `before` / `after` (keyset "
        "pages) and `since_compaction` as the ways to read it.",
        INBOX,
    ),
    EnvVar(
        "GLOVE_MAX_QUEUED_MESSAGES",
        "int",
        5,
        "Messages one chat may have waiting behind its running turn; more get 429.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_UVLOOP",
        "bool",
        True,
        "`turn_worker` and `run_agent` run on uvloop (when installed); off: asyncio's own loop.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_CONCURRENCY",
        "int",
        100,
        "Turns one worker process runs at once (they wait on the model, not the CPU).",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_DB_THREADS",
        "int",
        8,
        "Database threads (one connection each) those turns share, per worker process.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_RQ_WORKERS",
        "int",
        4,
        "RQ backend: RQ workers (a thread and a Redis connection each) in one `turn_worker`; "
        "they only hand sessions to its event loop.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_RQ_SOCKET_TIMEOUT_SECONDS",
        "float",
        3.0,
        "RQ backend: a Redis command (an enqueue) gives up after this; the stored turn then "
        "waits for a worker's sweep. Above the RQ workers' 1 s blocking pop.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_LEASE_SECONDS",
        "float",
        15.0,
        "A worker renews the lease of its running turns; a lease this old means the worker "
        "died, and another worker restarts the turn.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_WEBHOOK_SECRET",
        "str",
        "",
        "The HMAC-SHA256 key that signs a turn's completion webhook (`webhook` on a turn's "
        "start); empty: none is sent (each waits, and is sent once the key is set). Must "
        "differ from `GLOVE_WEBHOOK_SECRET` (what the server accepts).",
        TURNS,
        secret=True,
    ),
    EnvVar(
        "GLOVE_TURN_WEBHOOK_MAX_ATTEMPTS",
        "int",
        10,
        "A turn's completion webhook is tried this many times (backoff from 5 s, doubling, "
        "at most 10 min apart) before it is given up (`failed`).",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_WAIT_MAX_SECONDS",
        "float",
        60.0,
        "The longest `POST …/agent/turns?wait=<s>` and a blocking A2A `SendMessage` hold a "
        "request open for the turn to end (or to ask someone); a longer wait is a 400.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_PARK_AFTER_SECONDS",
        "float",
        5.0,
        "A turn waiting on a person (an approval, a permission prompt, a slot that waits for "
        "an answer) this long is parked in the database: it gives its worker slot back, and "
        "the answer continues it on any worker. 0 parks at once.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_MAX_ATTEMPTS",
        "int",
        3,
        "The most times one turn is started in all (restarts after a worker died included; "
        "a take-back of a turn waiting on a person when its worker died is not counted).",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_POLL_SECONDS",
        "float",
        0.02,
        "How often a worker running turns looks at the database for prompt answers and "
        "stops; and how often it looks for new tasks on the database queue where nothing "
        "wakes it (PostgreSQL while its LISTEN connection is down, a SQLite file whose "
        "wake-up socket cannot be made). On a SQLite file the processes of the machine wake "
        "the worker and the mesh peer through Unix sockets beside the database "
        "(`<database>.wake/`), so idle they sleep.",
        TURNS,
    ),
    EnvVar(
        "GLOVE_TURN_ANSWER_RECHECK_SECONDS",
        "float",
        1.0,
        "Answers, stops and database-queue tasks reach the worker by NOTIFY (PostgreSQL) or "
        "a local wake-up (a SQLite file); it still looks this often, a safety net for a "
        "lost one.",
        TURNS,
    ),
    # -- Live updates
    EnvVar(
        "GLOVE_LIVE_POLL_SECONDS",
        "float",
        0.25,
        "How often each server process looks at the event log when no commit wakes it.",
        LIVE,
    ),
    EnvVar(
        "GLOVE_LIVE_GAP_SECONDS",
        "float",
        10.0,
        "How long the relay waits for an event id committed out of order (a transaction "
        "still committing).",
        LIVE,
    ),
    EnvVar(
        "GLOVE_LIVE_REPLAY_LIMIT",
        "int",
        500,
        "The most events replayed to a reconnecting socket before it is told to reload its "
        "state instead.",
        LIVE,
    ),
    EnvVar(
        "GLOVE_SSE_HEARTBEAT_SECONDS",
        "float",
        15.0,
        "An open Server-Sent Events stream (`/api/sessions/<id>/events`) with nothing to send "
        "gets a comment line this often, so proxies keep it open.",
        LIVE,
    ),
    EnvVar(
        "GLOVE_MAX_OPEN_STREAMS_PER_USER",
        "int",
        20,
        "The most event streams (SSE `/api/sessions/<id>/events`, the pages' websockets) one "
        "user holds open; past it an SSE request is a 429 with `Retry-After` and a websocket "
        "is closed with 4429 (`retry_after=<seconds>`). Counted across the processes in Redis "
        "when REDIS_URL is set (a killed process's streams stop counting within a minute), "
        "else per process, as while Redis is away. 0: no cap.",
        LIVE,
    ),
    EnvVar(
        "GLOVE_LIVE_SEND_TIMEOUT_SECONDS",
        "float",
        0.2,
        "A turn's live push (text deltas, tool progress) gives up after this: a frozen Redis "
        "slows the live push only; the stored events reach pages through the event log.",
        LIVE,
    ),
    # -- The inbox, webhooks and limits
    EnvVar(
        "GLOVE_WEBHOOK_SECRET",
        "str",
        "",
        "Shared secret of signed webhooks resolving inbox items (`POST /api/inbox/resolve`, "
        "HMAC-SHA256 over the body). Empty: signed webhooks are refused.",
        INBOX,
    ),
    EnvVar(
        "GLOVE_WEBHOOK_MAX_SKEW_SECONDS",
        "int",
        300,
        "Replay window of signed webhooks: how far a signature's timestamp may be from now. "
        "Inside it each signature is accepted once.",
        INBOX,
    ),
    EnvVar(
        "GLOVE_INBOX_TTL_SECONDS",
        "int",
        0,
        "Inbox items chat agents post expire after this long (`0`: never); "
        '`manage.py expire_inbox_items` (cron) then answers them with an "Expired" response '
        "so no agent waits forever.",
        INBOX,
    ),
    EnvVar(
        "GLOVE_CHAT_URL_TTL_SECONDS",
        "int",
        900,
        "How long a signed chat URL (`POST /api/sessions/<id>/chat-url`) stays valid.",
        INBOX,
    ),
    # -- Approvals
    EnvVar(
        "GLOVE_APPROVAL_REMIND_SECONDS",
        "int",
        0,
        "An approval request nobody decided is reminded to its assignees after this long "
        "(`0`: no reminder), unless its tool declares `remind_after`.",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_ESCALATE_SECONDS",
        "int",
        0,
        "An approval request nobody decided goes to its escalation user or group after this "
        "long (`0`: never), unless its tool declares `escalate_after`.",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_EXPIRE_SECONDS",
        "int",
        3600,
        "An approval request nobody decided is decided by its `on_expire` (reject unless the "
        "tool says otherwise) after this long (`0`: never), unless its tool declares "
        "`expire_after`. The turn waits for the decision meanwhile.",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_TOOL_DEADLINES",
        "pairs",
        {},
        "Deadlines per tool, `tool=remind/escalate/expire` in seconds (`0` or empty: none), "
        "e.g. `checkout=60/120/600`; they win over the three defaults above and over the "
        "tool's own declaration.",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_ROUTER",
        "str",
        "",
        'Dotted path of a function `(request) -> {"user": username, "group": name}` that '
        "assigns approval requests (it wins over the tool's declaration; `None` keeps it). "
        "Unassigned requests wait in the shared queue every staff member sees.",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_SWEEP_SECONDS",
        "float",
        5.0,
        "How often the turn worker's scheduler runs the approvals' reminders, escalations "
        "and expiries (`approvals.tasks.approval_deadlines`).",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_WEBHOOKS",
        "pairs",
        {},
        "Outgoing webhooks per group, `group=url,...`: each notification (assigned, reminder, "
        "escalation, expiry) about a request of that group is POSTed there as Slack-compatible "
        "JSON, signed like the inbox webhooks (`X-Glove-Timestamp`, `X-Glove-Signature`).",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_WEBHOOK_SECRET",
        "str",
        "",
        "The HMAC-SHA256 key that signs the approvals' outgoing webhooks (what the server "
        "sends); empty: they are not sent. Must differ from `GLOVE_WEBHOOK_SECRET` (what the "
        "server accepts; `glove.E020`).",
        APPROVALS,
        secret=True,
    ),
    EnvVar(
        "GLOVE_APPROVAL_NOTIFY_MAX_ATTEMPTS",
        "int",
        8,
        "How often a notification (email or webhook) is tried, with doubling backoff from 5 s "
        "up to 10 minutes between tries, before it is marked failed.",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_NOTIFY_LEASE_SECONDS",
        "float",
        60.0,
        "A notification a worker claimed but never marked sent (the worker died while "
        "sending) is tried again after this long.",
        APPROVALS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_LINK_TTL_SECONDS",
        "int",
        7 * 24 * 3600,
        "How long the signed link in an approval email opens the request's decision page.",
        APPROVALS,
    ),
    EnvVar(
        "EMAIL_HOST",
        "str",
        "",
        "The SMTP server approval emails go through (Django's email framework); empty: "
        "emails are written to the log (the console backend) instead of sent.",
        APPROVALS,
    ),
    EnvVar("EMAIL_PORT", "int", 25, "The SMTP server's port.", APPROVALS),
    EnvVar("EMAIL_HOST_USER", "str", "", "The SMTP login, if the server wants one.", APPROVALS),
    EnvVar("EMAIL_HOST_PASSWORD", "str", "", "The SMTP password.", APPROVALS, secret=True),
    EnvVar("EMAIL_USE_TLS", "bool", False, "STARTTLS to the SMTP server.", APPROVALS),
    EnvVar(
        "DEFAULT_FROM_EMAIL",
        "str",
        "glove@localhost",
        "The sender of approval emails.",
        APPROVALS,
    ),
    # -- The mesh
    EnvVar(
        "MESH_TRANSPORT",
        "choice",
        "inprocess",
        "The agent mesh's transport: `inprocess`, `redis` or `database` (the `MESH` setting).",
        MESH,
        choices=("inprocess", "redis", "database"),
    ),
    EnvVar(
        "MESH_REDIS_URL",
        "str",
        Derived("`REDIS_URL`, else `redis://127.0.0.1:6379/0`"),
        "Redis of the `redis` mesh transport.",
        MESH,
    ),
    EnvVar(
        "MESH_SIGNING_KEYS",
        "pairs",
        {},
        "`agent=secret,agent=secret`: mesh messages are signed (HMAC-SHA256) and verified. "
        "None: unsigned, as in Glove.",
        MESH,
    ),
    EnvVar(
        "MESH_MAX_AGE_SECONDS",
        "int",
        300,
        "How far a signed mesh frame's `created_at` may lie from the receiver's clock (either "
        "way) before it is refused as stale; on the database transport it applies to every "
        "message. Ids are remembered per recipient for as long, so a replayed frame is refused.",
        MESH,
    ),
    EnvVar(
        "GLOVE_CHAT_MESH",
        "bool",
        False,
        "Chat agents join the mesh for their turns, as `chat-<session id>` (needs "
        "`MESH_TRANSPORT=database`); `make run` turns it on.",
        MESH,
    ),
    EnvVar(
        "GLOVE_MESH_TURNS_PER_MINUTE",
        "int",
        Derived("`GLOVE_TURNS_PER_USER_PER_MINUTE`"),
        "Wake-up turns per minute of a mesh peer (`run_agent`) whose inbox session has no "
        "owner; one with an owner counts against the owner's limit instead.",
        MESH,
    ),
    # -- The workspace inbox
    EnvVar(
        "GLOVE_PUBLIC_URL",
        "str",
        PUBLIC_URL_DEFAULT,
        "The server's URL as agents and e-mail links reach it (printed into `.mcp.json`). "
        "`make run` sets it to where it serves; `create_workspace` run from another shell "
        "follows the port `make run` last served on.",
        WORKSPACE,
    ),
    EnvVar(
        "GLOVE_WORKSPACE_FILE_MAX_BYTES",
        "int",
        1 << 20,
        "The largest workspace file the inbox renders (a bigger one is offered as a "
        "download, or explained).",
        WORKSPACE,
    ),
    EnvVar(
        "GLOVE_WORKSPACE_RENDER_MAX_DEPTH",
        "int",
        256,
        "An HTML or Markdown doc whose elements nest deeper than this is not rendered on the "
        'inbox page ("too complex to render here", with a download link): checked before '
        "the sanitiser, whose cost grows faster than the nesting.",
        WORKSPACE,
    ),
    EnvVar(
        "GLOVE_WORKSPACE_RENDER_MAX_ELEMENTS",
        "int",
        20000,
        "The most elements (HTML tags; in Markdown, twice this many markup characters such "
        "as `*_[]`) a doc may have to be rendered on the inbox page.",
        WORKSPACE,
    ),
    EnvVar(
        "GLOVE_WORKSPACE_RENDER_SECONDS",
        "float",
        3.0,
        'The longest a request waits for a doc to render; past it the page shows "too '
        'complex to render here" (remembered for that version of the file).',
        WORKSPACE,
    ),
    EnvVar(
        "GLOVE_DOC_IMAGE_HOSTS",
        "list",
        [],
        "Hosts whose images a rendered workspace doc may load (`img.example.com,cdn.example.org`, "
        "over HTTPS). Others are shown as a link and never fetched (a remote image can be a "
        "tracking pixel); the Content-Security-Policy allows exactly these.",
        WORKSPACE,
    ),
    EnvVar(
        "GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES",
        "int",
        100 << 20,
        "The largest workspace file the download route streams (413 beyond it; the entry "
        "says so instead of linking).",
        WORKSPACE,
    ),
    # -- Retention
    EnvVar(
        "GLOVE_RETENTION_SECONDS",
        "float",
        300.0,
        "How often the turn worker's scheduler sums the usage page's recent days "
        "(`usage_rollup`) and applies the retention below (no cron line): on PostgreSQL it "
        "first creates the partitions the logs will need and drops the expired ones, then "
        "deletes old rows in bounded batches, stopping between two when the worker stops. "
        "`0` turns it off (`usage_rollup` and the `prune_*` commands still work by hand).",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETENTION_BATCH",
        "int",
        1000,
        "Rows per `DELETE` when retention deletes rows (each batch its own short "
        "transaction, never one huge `DELETE`).",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_LIVE_EVENTS_DAYS",
        "float",
        7.0,
        "Days the live event log keeps an event (a page reconnecting from before the cut "
        "reloads its state: `resync`). `0` keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_IDEMPOTENCY_KEYS_DAYS",
        "float",
        2.0,
        "Days an `Idempotency-Key`'s answer is kept for a retry (keep more than any client "
        "retries for). `0` keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_TASK_RESULTS_DAYS",
        "float",
        7.0,
        "Days the database task queue keeps a finished task's result (django-tasks-db's "
        "`DBTaskResult`; queued and running tasks are never deleted). `0` keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_MESH_DAYS",
        "float",
        30.0,
        "Days the database mesh transport keeps its records: who sent a message (an ack "
        "after the cut is refused as one for an unknown message), deliveries (a send "
        "retried after the cut is delivered again) and deleted chats' registrations. `0` "
        "keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_INBOX_CONSUMED_DAYS",
        "float",
        30.0,
        "Days an inbox item is kept after its agent consumed it (pending and resolved items "
        "are never deleted). `0` keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_APPROVALS_DAYS",
        "float",
        365.0,
        "Days a decided or withdrawn approval request is kept, with its decision and "
        "notifications (the audit); open requests are never deleted. `0` keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_TURNS_DAYS",
        "float",
        90.0,
        "Days a finished turn (done, failed or stopped) is kept, with its prompts "
        "(`TurnSlot`); the messages it wrote stay with their session. Queued, running and "
        "waiting turns are never deleted. `0` keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_TURN_STEPS_DAYS",
        "float",
        30.0,
        "Days a turn's timeline steps (`TurnStep`: its attempts, model and tool calls, waits; "
        "the admin's waterfall and usage charts) are kept; they also go with their turn. "
        "`0` keeps them as long as the turn.",
        RETENTION,
    ),
    # -- Logins and the demo
    EnvVar(
        "GLOVE_DEMO_APPROVAL_BAGS",
        "int",
        5,
        "The coffee demo's checkout of more bags than this needs a staff approval (the "
        "`baristas` group decides, `managers` after 2 minutes; `0`: never).",
        LOGINS,
    ),
    EnvVar(
        "AXES_FAILURE_LIMIT",
        "int",
        5,
        "Failed logins for one username from one address before that pair is locked out "
        "(429); `manage.py axes_reset` unlocks.",
        LOGINS,
    ),
    EnvVar(
        "AXES_COOLOFF_HOURS",
        "float",
        1.0,
        "How long a lockout lasts, in hours.",
        LOGINS,
    ),
    EnvVar(
        "GLOVE_DEMO_LOGIN_HINT",
        "bool",
        Derived("`DEBUG`"),
        "The login page names the demo's logins while they keep their development passwords.",
        LOGINS,
    ),
    EnvVar(
        "DEMO_PASSWORD",
        "str",
        Derived("`demo-coffee` for a new user; an existing one keeps its password"),
        "The password `setup_demo` gives the `demo` user (set: it is reset to this).",
        LOGINS,
        read_by="`setup_demo`",
    ),
    EnvVar(
        "STAFF_PASSWORD",
        "str",
        Derived("`staff-coffee` for a new user; an existing one keeps its password"),
        "The password `setup_demo` gives the `staff` user (set: it is reset to this).",
        LOGINS,
        read_by="`setup_demo`",
    ),
    EnvVar(
        "BARISTA_PASSWORD",
        "str",
        Derived("`barista-coffee` for a new user; an existing one keeps its password"),
        "The password `setup_demo` gives the `barista` user (staff, in the `baristas` group "
        "that approves large orders; set: it is reset to this).",
        LOGINS,
        read_by="`setup_demo`",
    ),
    EnvVar(
        "MANAGER_PASSWORD",
        "str",
        Derived("`manager-coffee` for a new user; an existing one keeps its password"),
        "The password `setup_demo` gives the `manager` user (staff, in the `managers` group "
        "that large orders escalate to; set: it is reset to this).",
        LOGINS,
        read_by="`setup_demo`",
    ),
    # -- Metrics, cost and the turn timeline
    EnvVar(
        "GLOVE_METRICS_TOKEN",
        "str",
        "",
        "The bearer token `GET /metrics` asks for (`Authorization: Bearer <token>`); unset, "
        "`/metrics` answers 404, so the metrics are never public by default.",
        OBSERVE,
        secret=True,
    ),
    EnvVar(
        "GLOVE_MODEL_PRICES",
        "json",
        {"demo": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}},
        "The price table: a JSON object of model name (as its adapter reports it, or "
        "`provider:model`) to US dollars per million tokens, "
        '`{"claude-sonnet-4-5": {"input": 3, "output": 15, "cache_read": 0.3, '
        '"cache_write": 3.75}}`. A model not in it is shown as of unknown cost, never as '
        "free. The default prices only the offline demo model (at 0).",
        OBSERVE,
    ),
    EnvVar(
        "GLOVE_TIMELINE_MAX_STEPS",
        "int",
        200,
        "The most timeline steps (model calls, tool calls, waits) one attempt of a turn "
        "stores; later ones are counted in the metrics only.",
        OBSERVE,
    ),
    EnvVar(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "str",
        "",
        "Where traces go, over OTLP/HTTP (`http://collector:4318`; `/v1/traces` is added). "
        "Unset (and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` too), tracing is not set up and "
        "costs nothing. The SDK's other `OTEL_*` variables apply (`OTEL_SERVICE_NAME`, "
        "`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`).",
        OBSERVE,
        read_by="`gloveapp/observe/tracing.py` and the OpenTelemetry SDK",
    ),
    EnvVar(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "str",
        "",
        "The traces endpoint itself (the whole URL), instead of `OTEL_EXPORTER_OTLP_ENDPOINT`.",
        OBSERVE,
        read_by="`gloveapp/observe/tracing.py` and the OpenTelemetry SDK",
    ),
    EnvVar(
        "GLOVE_TRACED_REQUESTS_PER_SECOND",
        "float",
        1.0,
        "With tracing on: how many HTTP requests a second each server process starts a trace "
        "for (a token bucket; AWS X-Ray's default keeps the first request of each second "
        "too). Requests that come slowly are all traced; under load tracing costs that of "
        "this many traces a second, whatever the rate. Turns are always traced (a turn posted "
        "by a request left out is a trace of its own), and so is a request whose `traceparent` "
        "header is sampled, from a trusted caller (`GLOVE_TRACE_TRUSTED_PROXIES`); one whose "
        "header says not sampled never is. `inf` traces every "
        "request (a quarter to a half more CPU per REST request: `bench/observe_overhead.py`), "
        "`0` none but those a caller's header asks for.",
        OBSERVE,
    ),
    EnvVar(
        "GLOVE_TRACE_TRUSTED_PROXIES",
        "list",
        [],
        "With tracing on: the addresses or networks (`10.0.0.5`, `10.1.0.0/16`, "
        "comma-separated) of the proxies and services whose `traceparent` header is obeyed "
        "for any request they forward. A request with a valid API token is trusted too; "
        "anyone else's `traceparent` is ignored: the request is traced or not as the "
        "per-second budget says, in a trace of its own.",
        OBSERVE,
    ),
    EnvVar(
        "OTEL_TRACES_SAMPLER",
        "str",
        "",
        "The SDK's sampler (`parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG`, ...), "
        "applied to turns and to the requests `GLOVE_TRACED_REQUESTS_PER_SECOND` lets "
        "through. Unset: parent-based, and a root span kept unless it is a client call with "
        "nothing above it (a worker's polling statement).",
        OBSERVE,
        read_by="`gloveapp/observe/tracing.py` and the OpenTelemetry SDK",
    ),
    EnvVar(
        "OTEL_TRACES_EXPORTER",
        "str",
        "otlp",
        "`none` turns tracing off even with an endpoint set.",
        OBSERVE,
        read_by="`gloveapp/observe/tracing.py`",
    ),
    EnvVar(
        "OTEL_SDK_DISABLED",
        "str",
        "",
        "`true` turns tracing off even with an endpoint set.",
        OBSERVE,
        read_by="`gloveapp/observe/tracing.py` and the OpenTelemetry SDK",
    ),
    # -- Budgets
    EnvVar(
        "GLOVE_BUDGETS",
        "json",
        [],
        "Budgets declared in the settings (beside those staff declare in the admin): a JSON "
        'list of `{"id": "daily-per-user", "scope": "user", "window": "day", "cap_usd": '
        '"1.00", "action": "refuse"}`. `scope`: `user`, `group`, `agent`, `session` or '
        "`everyone` (with `target`: one username, group, agent or session id; without: each "
        "one apart); `window`: `minute`, `turn`, `day` or `month` (UTC); caps: `cap_usd` "
        "(US dollars, as `GLOVE_MODEL_PRICES`), `cap_tokens`, `cap_turns`; `action` at the "
        "cap: `warn`, `require_person` or `refuse`. See docs/howto/budgets.md.",
        BUDGETS,
    ),
    EnvVar(
        "GLOVE_BUDGET_MAX_OUTPUT_TOKENS",
        "int",
        4096,
        "The output tokens a model call is reserved for when its adapter declares no "
        "`max_tokens` of its own: a call's worst case is its input (estimated) at the input "
        "price plus this many tokens at the output price.",
        BUDGETS,
    ),
    EnvVar(
        "GLOVE_BUDGET_HEAL_AFTER_SECONDS",
        "float",
        300.0,
        "A reservation still open this long after it was made, of a turn that no longer "
        "runs, is settled at its maximum by the worker's scheduler (a take-back settles those "
        "of a dead worker's turn at once; this is the safety net).",
        BUDGETS,
    ),
    EnvVar(
        "GLOVE_RETAIN_BUDGET_LEDGER_DAYS",
        "float",
        90.0,
        "Days a settled or released budget reservation (the ledger) is kept, and a budget "
        "window's counter after its window ended. Open reservations are never deleted. `0` "
        "keeps them forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_RETAIN_LOGIN_RECORDS_DAYS",
        "float",
        90.0,
        "Days django-axes' records of logins are kept: each login and logout (access logs), "
        "each failure (access failure logs, when enabled) and each counted attempt (never one "
        "younger than AXES_COOLOFF_HOURS, which may still lock a login out). `0` keeps them "
        "forever.",
        RETENTION,
    ),
    EnvVar(
        "GLOVE_REPLAY_STALLED_SECONDS",
        "float",
        120.0,
        "A replay run that made no progress for this long lost its worker (or never had "
        "one): the turn worker's scheduler hands it to a worker again. A batch redone by two "
        "workers at once still stores each conversation's result once.",
        VERSIONS,
    ),
    EnvVar(
        "GLOVE_APPROVAL_SELF_APPROVAL",
        "bool",
        False,
        "Whether the person who asked for an approval (publishing an agent version) may "
        "decide it themselves. Off: someone else must (four eyes); on: for a team of one.",
        APPROVALS,
    ),
    EnvVar(
        "PROMETHEUS_MULTIPROC_DIR",
        "str",
        "",
        "A folder the processes of one server write their metrics to, so `/metrics` adds up "
        "every process's (the Prometheus client's multiprocess mode). `make serve-prod` sets "
        "it to a fresh folder and empties it at start; unset, a process exports its own.",
        OBSERVE,
        read_by="the Prometheus client (`make serve-prod` sets it)",
    ),
)

SETTINGS: Mapping[str, EnvVar] = {var.name: var for var in DECLARATIONS}
assert len(SETTINGS) == len(DECLARATIONS), "an environment variable is declared twice"

_NO_DEFAULT: Any = object()
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse_bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def _parse_number(cast: Callable[[str], Any], what: str) -> Callable[[str, str], Any]:
    def parse(name: str, raw: str) -> Any:
        try:
            return cast(raw.strip())
        except ValueError:
            raise ValueError(f"{name} must be {what}, got {raw!r}") from None

    return parse


def _parse_list(name: str, raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _parse_json(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as error:
        raise ValueError(f"{name} must be JSON ({error})") from None


def _parse_pairs(name: str, raw: str) -> dict[str, str]:
    pairs = {}
    for part in _parse_list(name, raw):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{name} must look like agent=secret,agent=secret")
        pairs[key.strip()] = value.strip()
    return pairs


PARSERS: dict[str, Callable[[str, str], Any]] = {
    "bool": _parse_bool,
    "int": _parse_number(int, "a whole number"),
    "float": _parse_number(float, "a number"),
    "str": lambda name, raw: raw,
    "choice": lambda name, raw: raw.strip(),
    "list": _parse_list,
    "pairs": _parse_pairs,
    "json": _parse_json,
}


def env(name: str, default: Any = _NO_DEFAULT, environ: Mapping[str, str] | None = None) -> Any:
    """The value of a declared environment variable, parsed by its kind.

    Unset or empty means the declared default. `default` is given only for a variable whose
    declared default is `Derived` (computed from other settings); for any other it is an
    error, so the default lives in one place.
    """
    var = SETTINGS.get(name)
    if var is None:
        raise KeyError(f"{name} is not declared in gloveapp/conf.py")
    derived = isinstance(var.default, Derived)
    if derived and default is _NO_DEFAULT:
        raise TypeError(f"{name}'s default is computed ({var.default.text}): pass default=")
    if not derived and default is not _NO_DEFAULT:
        raise TypeError(f"{name}'s default is declared in gloveapp/conf.py: pass none")
    fallback = default if derived else var.default
    raw = (os.environ if environ is None else environ).get(name, "")
    if raw.strip() == "":
        # A copy: a settings list (ALLOWED_HOSTS) may be changed without changing the default.
        return copy.copy(fallback)
    value = PARSERS[var.kind](name, raw)
    if var.choices and value not in var.choices:
        raise ValueError(f"{name} must be one of {', '.join(var.choices)}, got {raw!r}")
    return value


# The settings the apps read whose default is computed from other settings.
_DERIVED_APP_DEFAULTS: dict[str, Callable[[Any], Any]] = {
    # Another project's processes run no statement bound unless it sets one.
    "GLOVE_DB_STATEMENT_TIMEOUT_SECONDS": lambda settings: 0.0,
    "GLOVE_DB_WAIT_SECONDS": lambda settings: (
        settings.GLOVE_DB_STATEMENT_TIMEOUT_SECONDS + 2
        if settings.GLOVE_DB_STATEMENT_TIMEOUT_SECONDS > 0
        else 0.0
    ),
    "GLOVE_MESH_TURNS_PER_MINUTE": lambda settings: settings.GLOVE_TURNS_PER_USER_PER_MINUTE,
    "GLOVE_CHAT_RATE": lambda settings: f"{settings.GLOVE_TURNS_PER_USER_PER_MINUTE}/min",
    # Another project's login page never names this project's demo logins.
    "GLOVE_DEMO_LOGIN_HINT": lambda settings: False,
    "GLOVE_PREPARED_STATEMENTS": lambda settings: not getattr(settings, "DATABASE_DIRECT_URL", ""),
}


# What an HTTP server process defaults to, set by its entry point before Django starts, as it
# sets DB_POOL_SIZE: gloveapp/asgi.py and gloveapp/wsgi.py.
HTTP_STATEMENT_TIMEOUT_SECONDS = 30


def http_process_defaults(environ: Any = None) -> None:
    """An HTTP server's defaults: its statements bounded (GLOVE_DB_STATEMENT_TIMEOUT_SECONDS),
    unless DEBUG is on or the variable is set."""
    environ = os.environ if environ is None else environ
    if not env("DEBUG", environ=environ):
        environ.setdefault(
            "GLOVE_DB_STATEMENT_TIMEOUT_SECONDS", str(HTTP_STATEMENT_TIMEOUT_SECONDS)
        )


def is_app_setting(var: EnvVar) -> bool:
    """Whether the apps read `var` as the Django setting of the same name."""
    return (var.name.startswith("GLOVE_") or var.name == "REDIS_URL") and not var.read_by


def fill_app_defaults(settings: Any) -> list[str]:
    """Give `settings` every setting the apps read that it lacks, at its declared default;
    returns the names filled in.

    `gloveapp.settings` sets them all (from the environment). Another project that installs
    the apps (docs/howto/existing-project.md) sets only those it wants to change; the apps'
    `AppConfig.ready()` fills in the rest, so no app reads a setting that is not there.
    """
    filled = []
    plain = [var for var in DECLARATIONS if is_app_setting(var)]
    # Declared defaults first: the computed ones are made from them.
    plain.sort(key=lambda var: isinstance(var.default, Derived))
    for var in plain:
        if hasattr(settings, var.name):
            continue
        if isinstance(var.default, Derived):
            value = _DERIVED_APP_DEFAULTS[var.name](settings)
        else:
            value = copy.copy(var.default)
        setattr(settings, var.name, value)
        filled.append(var.name)
    return filled


def reference_markdown() -> str:
    """The settings tables of docs/reference/settings.md, group by group."""
    groups: dict[str, list[EnvVar]] = {}
    for var in DECLARATIONS:
        groups.setdefault(var.group, []).append(var)
    out: list[str] = []
    for group, variables in groups.items():
        out += [
            f"## {group}",
            "",
            "| variable | type | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        for var in variables:
            kind = f"one of {', '.join(f'`{c}`' for c in var.choices)}" if var.choices else var.kind
            default = var.default_text()
            if not isinstance(var.default, Derived) and default != "none":
                default = f"`{default}`"
            meaning = var.meaning + (f" Read by {var.read_by}." if var.read_by else "")
            cell = meaning.replace("|", "\\|")
            # An anchor per variable: other pages link to settings.md#GLOVE_MODEL.
            out.append(f"| `{var.name}`{{#{var.name}}} | {kind} | {default} | {cell} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(reference_markdown())
