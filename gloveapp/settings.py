"""Settings for glove-django: one file, driven by environment variables.

With no variables set it runs offline: SQLite, the in-memory channel layer and the
rule-based demo model. Each external part is switched on by its own variable. Every variable
is declared once, with its type, default and meaning, in gloveapp/conf.py and read here with
`env()`; the settings reference in docs/ is generated from those declarations.
"""

from __future__ import annotations

import ipaddress
import math
import warnings
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from gloveapp.conf import env

BASE_DIR = Path(__file__).resolve().parent.parent

# Off unless asked for: `make run` turns it on for the local demo.
DEBUG = env("DEBUG")
# The fallback key is only good for local development; system checks warn when
# DEBUG is off and it is still in use.
SECRET_KEY = env("SECRET_KEY")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS")

# Production over HTTPS (examples/production.env): GLOVE_HTTPS=1 redirects plain HTTP,
# marks the cookies secure and sends HSTS; each part can be set on its own too.
GLOVE_HTTPS = env("GLOVE_HTTPS")
SECURE_SSL_REDIRECT = env("SECURE_SSL_REDIRECT", default=GLOVE_HTTPS)
SESSION_COOKIE_SECURE = env("SESSION_COOKIE_SECURE", default=GLOVE_HTTPS)
CSRF_COOKIE_SECURE = env("CSRF_COOKIE_SECURE", default=GLOVE_HTTPS)
SECURE_HSTS_SECONDS = env("SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if GLOVE_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env("SECURE_HSTS_PRELOAD")
# Behind a proxy that always sets X-Forwarded-Proto / X-Forwarded-For (and strips a
# client's own): trust them for "is this HTTPS" and for the client address (login lockout).
GLOVE_BEHIND_PROXY = env("GLOVE_BEHIND_PROXY")
if GLOVE_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"

INSTALLED_APPS = [
    # Daphne's `runserver` (ASGI), without importing Daphne in every process.
    "gloveapp.lib.http.runserver.DaphneConfig",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "channels",
    "django_tasks_db",
    # Bottom -> top (the import contract in pyproject.toml checks the same order).
    "gloveapp.live",
    "gloveapp.conversations",
    "inbox",
    "mesh",
    "gloveapp.agents",
    "gloveapp.approvals",
    "gloveapp.budgets",
    "gloveapp.versions",
    "gloveapp.demo",
    "gloveapp.api",
    "gloveapp.turns",
    "gloveapp.pages",
    "axes",
]

MIDDLEWARE = [
    # Outermost: an error page that fails to build (DEBUG's included) still ends the request
    # with a bare 500, so its pooled connection goes back (gloveapp/lib/http/last_resort.py).
    "gloveapp.lib.http.last_resort.LastResortMiddleware",
    # First: every answer counted and timed by route template (gloveapp/lib/http/red.py).
    "gloveapp.lib.http.red.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every response (SECURE_CSP below).
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # Serves STATIC_ROOT (collectstatic) with DEBUG off, straight from the ASGI app
    # (WhiteNoise's, able to run async: gloveapp/lib/http/middleware.py).
    "gloveapp.lib.http.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Lets admin lists and views marked @reads_may_lag read a replica (none configured: a
    # no-op), and keeps a person who just wrote on the primary (gloveapp/lib/db/replicas.py).
    "gloveapp.lib.db.replicas.LagTolerantReads",
    # Django's, its storage built when a message is read or added (gloveapp/lib/http/middleware.py).
    "gloveapp.lib.http.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it answers a locked-out login attempt.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "gloveapp.urls"
# DEBUG's technical 500 page and the error e-mails, always encodable (a lone surrogate in an
# error's text is written as an escape instead of breaking the page).
DEFAULT_EXCEPTION_REPORTER = "gloveapp.lib.http.last_resort.EncodableExceptionReporter"
ASGI_APPLICATION = "gloveapp.asgi.application"
WSGI_APPLICATION = "gloveapp.wsgi.application"  # gunicorn, `make serve-prod`

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Which kind of server this process is: "asgi" (Daphne/uvicorn, the default and what
# `make run` uses), "granian" (WSGI under granian, the production HTTP server) or "wsgi"
# (gunicorn); gloveapp/wsgi.py tells the last two apart. It decides how database connections
# are reused: under gunicorn each server thread keeps its own (DB_CONN_MAX_AGE); under ASGI
# each request's sync code may run on a new thread, and granian's threads exit when idle,
# so a kept connection would leak, and PostgreSQL connections come from psycopg's pool.
GLOVE_SERVER = env("GLOVE_SERVER")

# SQLite by default; DATABASE_URL (e.g. postgres://user@host:5432/name) for anything else.
DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env("DB_CONN_MAX_AGE"),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (the server, a management command, a webhook worker) write to
    # one file: wait for the lock instead of failing, and take it at BEGIN (IMMEDIATE), so
    # a read-then-write transaction never fails to upgrade its lock. WAL lets readers run
    # beside the writer. synchronous=NORMAL syncs the WAL at checkpoints, not at every
    # commit: a power loss (not a crash of the process) may lose the last commits, never
    # corrupt the file (docs/explanation/performance.md).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
# Bounded waits on PostgreSQL (docs/explanation/performance.md, "Bounded queries"): a
# statement runs at most GLOVE_DB_STATEMENT_TIMEOUT_SECONDS (the server cancels it; on in the
# HTTP servers, set by their entry points), a connection is waited for at most
# GLOVE_DB_CONNECT_TIMEOUT_SECONDS, and an answer at most GLOVE_DB_WAIT_SECONDS, past which
# the connection is cut (gloveapp/lib/db/timeouts.py, a frozen server cancels nothing). Each is a 503 with
# Retry-After for a request.
GLOVE_DB_STATEMENT_TIMEOUT_SECONDS = env("GLOVE_DB_STATEMENT_TIMEOUT_SECONDS", default=0.0)
GLOVE_DB_CONNECT_TIMEOUT_SECONDS = env("GLOVE_DB_CONNECT_TIMEOUT_SECONDS")
GLOVE_DB_WAIT_SECONDS = env(
    "GLOVE_DB_WAIT_SECONDS",
    default=GLOVE_DB_STATEMENT_TIMEOUT_SECONDS + 2
    if GLOVE_DB_STATEMENT_TIMEOUT_SECONDS > 0
    else 0.0,
)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    # libpq's connect_timeout (whole seconds, 2 at least): a frozen server's handshake.
    _options.setdefault("connect_timeout", max(2, math.ceil(GLOVE_DB_CONNECT_TIMEOUT_SECONDS)))
# psycopg's connection pool (PostgreSQL), the only way to reuse connections under ASGI and
# granian: gloveapp/asgi.py and gloveapp/wsgi.py (under granian) turn it on (10 per
# process) unless DB_POOL_SIZE says otherwise; 0 is off (management commands and tests
# open connections as they need them). It must exceed the threads that hold a connection
# at once: asgiref's sync pool and the live relay's thread, or granian's blocking threads.
DB_POOL_SIZE = env("DB_POOL_SIZE", default=0)
if (
    DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    and DB_POOL_SIZE > 0
    and not DATABASES["default"].get("CONN_MAX_AGE")
):
    from gloveapp.lib.db.outages import pool_check

    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DB_POOL_SIZE,
        "timeout": GLOVE_DB_CONNECT_TIMEOUT_SECONDS,
        # A connection the server closed (a restart) is replaced, not handed to a request.
        "check": pool_check,
    }
# PgBouncer in transaction mode in front of PostgreSQL: DATABASE_URL names PgBouncer, and
# DATABASE_DIRECT_URL the server, for the LISTEN connections (gloveapp/live/relay.py), which
# hold a session a transaction pooler would hand to someone else.
DATABASE_DIRECT_URL = env("DATABASE_DIRECT_URL")
if (
    DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    and GLOVE_DB_STATEMENT_TIMEOUT_SECONDS > 0
    and not DATABASE_DIRECT_URL
):
    # Sent with the connection's start (no round trip of its own). PgBouncer refuses that
    # startup parameter: behind it, set the timeout on the database role instead
    # (docs/howto/deploy.md); GLOVE_DB_WAIT_SECONDS still bounds the wait for an answer.
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _timeout = f"-c statement_timeout={int(GLOVE_DB_STATEMENT_TIMEOUT_SECONDS * 1000)}"
    _options["options"] = f"{_options.get('options', '')} {_timeout}".strip()
if DATABASE_DIRECT_URL and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # `.iterator()` reads through a server-side cursor, declared WITH HOLD outside a
    # transaction: a transaction pooler may run its next FETCH on another server connection,
    # where no such cursor exists (Django's advice for transaction pooling).
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# PostgreSQL: the hot statements (appends, history reads) are prepared once per connection
# instead of planned on every run (gloveapp/lib/db/prepared.py). Off behind a transaction-pooling
# PgBouncer older than 1.21, which cannot keep prepared statements.
GLOVE_PREPARED_STATEMENTS = env("GLOVE_PREPARED_STATEMENTS", default=not DATABASE_DIRECT_URL)
# Streaming replicas: reads that tolerate lag go there (gloveapp/lib/db/replicas.py), with the
# primary's connection settings; migrations and writes never.
for number, url in enumerate(env("DATABASE_REPLICA_URLS"), start=1):
    DATABASES[f"replica{number}"] = {
        **dj_database_url.parse(url, conn_max_age=DATABASES["default"]["CONN_MAX_AGE"]),
        "OPTIONS": dict(DATABASES["default"].get("OPTIONS", {})),
        "DISABLE_SERVER_SIDE_CURSORS": DATABASES["default"].get(
            "DISABLE_SERVER_SIDE_CURSORS", False
        ),
        "TEST": {"MIRROR": "default"},
    }
DATABASE_ROUTERS = ["gloveapp.lib.db.replicas.ReplicaRouter"] if len(DATABASES) > 1 else []
GLOVE_REPLICA_PIN_SECONDS = env("GLOVE_REPLICA_PIN_SECONDS")
# PostgreSQL: an append outside a transaction lets go of its session's lock when its rows
# are written, not when they reach the disk, and answers once they have
# (docs/explanation/performance.md, "Durability"). Off: one session's appends also wait
# for each other's disk flushes.
GLOVE_EARLY_LOCK_RELEASE = env("GLOVE_EARLY_LOCK_RELEASE")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL")


def caches_for(redis_url: str) -> dict:
    """The cache every process shares (rate limits, rendered docs; gloveapp/live/cache.py):
    Redis when a URL is given, else the database's `glove_cache` table (made by `live/0001`)."""
    if redis_url:
        return {
            "default": {
                "BACKEND": "gloveapp.live.cache.ResilientRedisCache",
                "LOCATION": redis_url,
                "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 2.0},
            }
        }
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "glove_cache",
        }
    }


CACHES = caches_for(REDIS_URL)


def channel_layers_for(redis_url: str) -> dict:
    """The in-memory layer, or channels_redis when a Redis URL is given."""
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # redis-py 8 times out socket reads after 5 s by default, which aborts channels_redis's
    # blocking 5 s BZPOPMIN and kills every idle websocket (django/channels_redis#422):
    # allow reads longer than that pop, still short enough to notice a dead connection.
    host = {"address": redis_url, "socket_timeout": 15}
    # channels_redis, riding out Redis being away (gloveapp/live/layers.py).
    return {
        "default": {
            "BACKEND": "gloveapp.live.layers.ResilientRedisChannelLayer",
            "CONFIG": {"hosts": [host]},
        }
    }


CHANNEL_LAYERS = channel_layers_for(REDIS_URL)


def mesh_for(
    transport: str, redis_url: str, signing_keys: dict[str, str], max_age: int = 300
) -> dict:
    """The mesh transport (see mesh/layers.py): in-process unless MESH_TRANSPORT says otherwise."""
    backends = {
        "inprocess": ("mesh.transports.inprocess.InProcessMeshTransport", {}),
        "redis": (
            "mesh.transports.redis_pubsub.RedisMeshTransport",
            {"url": redis_url or "redis://127.0.0.1:6379/0"},
        ),
        "database": ("mesh.transports.database.DatabaseMeshTransport", {}),
    }
    if transport not in backends:
        raise ValueError(f"MESH_TRANSPORT must be one of {', '.join(backends)}, got {transport!r}")
    backend, config = backends[transport]
    if signing_keys:
        config["signing_keys"] = signing_keys
    config["max_age"] = max_age
    return {"default": {"BACKEND": backend, "CONFIG": config}}


# Agents on the mesh: MESH_TRANSPORT=inprocess|redis|database (MESH_REDIS_URL, else REDIS_URL);
# MESH_SIGNING_KEYS=agent=secret,... turns on signed messages.
MESH = mesh_for(
    env("MESH_TRANSPORT"),
    env("MESH_REDIS_URL", default=REDIS_URL),
    env("MESH_SIGNING_KEYS"),
    env("MESH_MAX_AGE_SECONDS"),
)
# External A2A agents as mesh peers, kept on the mesh by `manage.py run_a2a_peers`: mesh id
# -> {"card_url": ..., "token_env": "<variable holding its bearer token>", ...}
# (docs/reference/mesh.md#external-a2a-agents).
MESH_A2A_PEERS: dict = {}
# Chat agents join the mesh for their turns (as `chat-<session id>`, their inbox being the
# chat): they can ask peers such as the demo's roastery. Needs MESH_TRANSPORT=database (the
# replies must reach the chat while no turn runs). `make run` turns both on.
GLOVE_CHAT_MESH = env("GLOVE_CHAT_MESH")
# Live updates (gloveapp/live): each server process polls the event log this
# often when no commit wakes it; remembers skipped ids (transactions still committing) this
# long; and replays at most this many events to a reconnecting socket before telling it to
# reload its state instead.
GLOVE_LIVE_POLL_SECONDS = env("GLOVE_LIVE_POLL_SECONDS")
GLOVE_LIVE_GAP_SECONDS = env("GLOVE_LIVE_GAP_SECONDS")
GLOVE_LIVE_REPLAY_LIMIT = env("GLOVE_LIVE_REPLAY_LIMIT")
# An idle Server-Sent Events stream gets a heartbeat comment this often.
GLOVE_SSE_HEARTBEAT_SECONDS = env("GLOVE_SSE_HEARTBEAT_SECONDS")
GLOVE_MAX_OPEN_STREAMS_PER_USER = env("GLOVE_MAX_OPEN_STREAMS_PER_USER")

# django-axes counts failed logins (the site's and the admin's, both go through
# authenticate()): after AXES_FAILURE_LIMIT failures for one username from one address, that
# pair is locked for AXES_COOLOFF_HOURS and gets 429. `manage.py axes_reset` unlocks.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env("AXES_FAILURE_LIMIT")
AXES_COOLOFF_TIME = env("AXES_COOLOFF_HOURS")
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Behind a proxy, the client address comes from the header the proxy sets (see the
# production settings in docs/howto/deploy.md); directly, from the socket.
AXES_IPWARE_META_PRECEDENCE_ORDER = env(
    "AXES_IP_HEADERS",
    default=["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if GLOVE_BEHIND_PROXY else ["REMOTE_ADDR"],
)

# Django's own list unless set: the test suite hashes with MD5, as Django's docs advise.
if env("GLOVE_PASSWORD_HASHERS"):
    PASSWORD_HASHERS = env("GLOVE_PASSWORD_HASHERS")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# The project-level assets (vendored htmx, live.js, css) live in the gloveapp package,
# which is not an installed app itself.
STATICFILES_DIRS = [BASE_DIR / "gloveapp" / "static"]
# WhiteNoise serves the static files with DEBUG off too, straight from the app folders (no
# collectstatic step to forget; `collectstatic` into STATIC_ROOT still works for a proxy).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
# ...so a missing STATIC_ROOT is normal, not worth WhiteNoise's warning on every start.
warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
# The login page names the demo's logins while they keep their development passwords; on by
# default only in debug (`make run`), as each check hashes a password.
GLOVE_DEMO_LOGIN_HINT = env("GLOVE_DEMO_LOGIN_HINT", default=DEBUG)

# Turns one user may start per minute: chat pages and `turns.public.submit_message` (mesh wake-ups
# included) count stored turns; /api/chat, whose turns run in the client, is throttled at the
# same rate unless GLOVE_CHAT_RATE says otherwise.
GLOVE_TURNS_PER_USER_PER_MINUTE = env("GLOVE_TURNS_PER_USER_PER_MINUTE")
# Wake-up turns per minute of a mesh peer (`run_agent`) whose inbox session has no owner;
# one with an owner counts against the owner's GLOVE_TURNS_PER_USER_PER_MINUTE instead.
GLOVE_MESH_TURNS_PER_MINUTE = env(
    "GLOVE_MESH_TURNS_PER_MINUTE", default=GLOVE_TURNS_PER_USER_PER_MINUTE
)

GLOVE_CHAT_RATE = env("GLOVE_CHAT_RATE", default=f"{GLOVE_TURNS_PER_USER_PER_MINUTE}/min")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "gloveapp.api.common.token_auth.CachedTokenAuthentication",
        "gloveapp.api.common.auth.SameOriginJsonSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "gloveapp.api.common.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Each /api/chat call is a paid model call: limit how often one user may make them.
    "DEFAULT_THROTTLE_RATES": {"chat": GLOVE_CHAT_RATE},
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "gloveapp.api.common.errors.exception_handler",
}
# How long a process trusts a token it has checked (gloveapp/api/common/token_auth.py); 0: never.
GLOVE_TOKEN_CACHE_SECONDS = env("GLOVE_TOKEN_CACHE_SECONDS")
SPECTACULAR_SETTINGS = {
    "TITLE": "glove-django API",
    "DESCRIPTION": "The Glove remote store, inbox resolution and workspace inbox.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the installed sidecar package, served as our own static files: the
    # docs work offline and nothing loads from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several Glove types have a `status`; name each choice set instead of a hash suffix.
    "ENUM_NAME_OVERRIDES": {
        "TaskStatusEnum": "gloveapp.core.types.TASK_STATUSES",
        "InboxStatusEnum": "gloveapp.core.types.INBOX_STATUSES",
        "ApprovalDecisionEnum": "gloveapp.core.approvals.decisions.DECISIONS",
        "InboxDecisionEnum": "gloveapp.core.approvals.inbox.INBOX_DECISIONS",
        "PermissionStatusEnum": "gloveapp.core.types.PERMISSION_STATUSES",
        "PermissionDecisionEnum": "gloveapp.core.approvals.permissions.PERMISSION_DECISIONS",
        "PermissionAnswerEnum": "gloveapp.turns.permissions.PERMISSION_ANSWER_WORDS",
    },
}

# The model the agents talk to: "demo" (offline, rule-based), "scripted",
# "anthropic:<model>" (ANTHROPIC_API_KEY) or "openai:<model>" (OPENAI_API_KEY, OPENAI_BASE_URL).
GLOVE_MODEL = env("GLOVE_MODEL")
# Agent name -> dotted path of a factory returning its tools and system prompt (or a dict:
# "factory", its extensions, and "open_to": who may start a chat with it).
GLOVE_AGENTS = {
    "coffee": "gloveapp.demo.coffee.build_agent",
    # The mesh demo's second agent: `manage.py run_agent roastery --mesh-id roastery`. Only
    # the mesh reaches it: no customer may open a chat with the shop's supplier.
    "roastery": {"factory": "gloveapp.demo.roastery.build_agent", "open_to": "mesh"},
}
GLOVE_DEFAULT_AGENT = env("GLOVE_DEFAULT_AGENT")
# Shared secret for signed webhooks resolving inbox items (HMAC-SHA256 over the body).
# How long a signed chat URL (`POST /api/sessions/<id>/chat-url`) stays valid.
GLOVE_CHAT_URL_TTL_SECONDS = env("GLOVE_CHAT_URL_TTL_SECONDS")
GLOVE_WEBHOOK_SECRET = env("GLOVE_WEBHOOK_SECRET")
# Metrics and cost (docs/howto/observe.md): `/metrics` answers only with this bearer token;
# the price table turns stored token usage into cost (a model without a price: unknown).
GLOVE_METRICS_TOKEN = env("GLOVE_METRICS_TOKEN")
GLOVE_TRACED_REQUESTS_PER_SECOND = env("GLOVE_TRACED_REQUESTS_PER_SECOND")
# Whose `traceparent` is obeyed besides a caller with a valid API token (gloveapp/lib/telemetry.py).
GLOVE_TRACE_TRUSTED_PROXIES = env("GLOVE_TRACE_TRUSTED_PROXIES")
for _proxy in GLOVE_TRACE_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"GLOVE_TRACE_TRUSTED_PROXIES: {_proxy!r} is not an address or a network."
        ) from None
if not GLOVE_TRACED_REQUESTS_PER_SECOND >= 0:  # NaN too
    raise ImproperlyConfigured("GLOVE_TRACED_REQUESTS_PER_SECOND must be 0 or more, or inf.")
GLOVE_MODEL_PRICES = env("GLOVE_MODEL_PRICES")
# Budgets (docs/howto/budgets.md): defaults declared here, beside the admin's; a model call's
# worst case when its adapter names no max_tokens; the safety net for open reservations.
GLOVE_BUDGETS = env("GLOVE_BUDGETS")
GLOVE_BUDGET_MAX_OUTPUT_TOKENS = env("GLOVE_BUDGET_MAX_OUTPUT_TOKENS")
GLOVE_BUDGET_HEAL_AFTER_SECONDS = env("GLOVE_BUDGET_HEAL_AFTER_SECONDS")
# Agent versions and replay (docs/howto/versions.md): when a replay run's worker is taken for
# dead; whether who asked to publish may approve it too.
GLOVE_REPLAY_STALLED_SECONDS = env("GLOVE_REPLAY_STALLED_SECONDS")
GLOVE_APPROVAL_SELF_APPROVAL = env("GLOVE_APPROVAL_SELF_APPROVAL")
# A turn's timeline (its steps, stored as it runs): bounded per attempt (kept for
# GLOVE_RETAIN_TURN_STEPS_DAYS, with the other retentions).
GLOVE_TIMELINE_MAX_STEPS = env("GLOVE_TIMELINE_MAX_STEPS")
GLOVE_WEBHOOK_MAX_SKEW_SECONDS = env("GLOVE_WEBHOOK_MAX_SKEW_SECONDS")
# Items chat agents post expire after this long (0: never); `manage.py expire_inbox_items`
# then answers them with an "Expired" response so no agent waits forever.
GLOVE_INBOX_TTL_SECONDS = env("GLOVE_INBOX_TTL_SECONDS")
# Approvals (docs/howto/approvals.md): default deadlines, per-tool deadlines, routing, sweep.
GLOVE_APPROVAL_REMIND_SECONDS = env("GLOVE_APPROVAL_REMIND_SECONDS")
GLOVE_APPROVAL_ESCALATE_SECONDS = env("GLOVE_APPROVAL_ESCALATE_SECONDS")
GLOVE_APPROVAL_EXPIRE_SECONDS = env("GLOVE_APPROVAL_EXPIRE_SECONDS")
GLOVE_APPROVAL_TOOL_DEADLINES = env("GLOVE_APPROVAL_TOOL_DEADLINES")
GLOVE_APPROVAL_ROUTER = env("GLOVE_APPROVAL_ROUTER")
GLOVE_APPROVAL_SWEEP_SECONDS = env("GLOVE_APPROVAL_SWEEP_SECONDS")
GLOVE_DEMO_APPROVAL_BAGS = env("GLOVE_DEMO_APPROVAL_BAGS")
# Approval notifications: webhooks per group, their key, retries, the email link's life.
GLOVE_APPROVAL_WEBHOOKS = env("GLOVE_APPROVAL_WEBHOOKS")
GLOVE_APPROVAL_WEBHOOK_SECRET = env("GLOVE_APPROVAL_WEBHOOK_SECRET")
GLOVE_APPROVAL_NOTIFY_MAX_ATTEMPTS = env("GLOVE_APPROVAL_NOTIFY_MAX_ATTEMPTS")
GLOVE_APPROVAL_NOTIFY_LEASE_SECONDS = env("GLOVE_APPROVAL_NOTIFY_LEASE_SECONDS")
GLOVE_APPROVAL_LINK_TTL_SECONDS = env("GLOVE_APPROVAL_LINK_TTL_SECONDS")
# Email (approval notifications), as Django's mailers: SMTP when EMAIL_HOST is set, else
# written to the log.
_EMAIL_HOST = env("EMAIL_HOST")
MAILERS = {
    "default": (
        {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {
                "host": _EMAIL_HOST,
                "port": env("EMAIL_PORT"),
                "username": env("EMAIL_HOST_USER") or None,
                "password": env("EMAIL_HOST_PASSWORD") or None,
                "use_tls": env("EMAIL_USE_TLS"),
                "timeout": 10,
            },
        }
        if _EMAIL_HOST
        else {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
    )
}
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL")
# Agent extensions (docs/howto/agents.md): MCP tool lists, subagent bounds.
GLOVE_MCP_TOOLS_TTL_SECONDS = env("GLOVE_MCP_TOOLS_TTL_SECONDS")
GLOVE_TOOL_RESULT_MAX_BYTES = env("GLOVE_TOOL_RESULT_MAX_BYTES")
GLOVE_TOOL_RESULT_KEEP_MAX_BYTES = env("GLOVE_TOOL_RESULT_KEEP_MAX_BYTES")
GLOVE_SUBAGENT_MAX_DEPTH = env("GLOVE_SUBAGENT_MAX_DEPTH")
GLOVE_SUBAGENT_MAX_TURNS = env("GLOVE_SUBAGENT_MAX_TURNS")
GLOVE_SUBAGENT_MAX_TOKENS = env("GLOVE_SUBAGENT_MAX_TOKENS")
# Messages one chat may have waiting behind its running turn; more are refused (429).
GLOVE_MAX_QUEUED_MESSAGES = env("GLOVE_MAX_QUEUED_MESSAGES")
GLOVE_LAZY_SESSIONS = env("GLOVE_LAZY_SESSIONS")
GLOVE_HISTORY_UNPAGED_MAX = env("GLOVE_HISTORY_UNPAGED_MAX")

# Chat turns run as Django Tasks (gloveapp/turns). "db" (default): django-tasks-db's queue in
# this database, worked by `manage.py turn_worker` (`make run` starts one). "rq": RQ on
# REDIS_URL through django-tasks-rq, for many workers (`manage.py turn_worker` as well).
GLOVE_TASKS_BACKEND = env("GLOVE_TASKS_BACKEND")


def task_backends_for(name: str, redis_url: str) -> dict:
    if name == "rq":
        if not redis_url:
            raise ImproperlyConfigured("GLOVE_TASKS_BACKEND=rq needs REDIS_URL.")
        # django-tasks-rq on one shared Redis client per process (gloveapp/turns/queue/rq_backend.py).
        return {
            "default": {
                "BACKEND": "gloveapp.turns.queue.rq_backend.TurnsRQBackend",
                "QUEUES": ["default"],
            }
        }
    if name != "db":
        raise ImproperlyConfigured(f"GLOVE_TASKS_BACKEND must be db or rq, not {name!r}.")
    return {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


TASKS = task_backends_for(GLOVE_TASKS_BACKEND, REDIS_URL)
if GLOVE_TASKS_BACKEND == "rq":
    # django-tasks-rq's system check asks for django-rq's app (its queues and job views).
    INSTALLED_APPS.append("django_rq")
RQ_QUEUES = {"default": {"URL": REDIS_URL or "redis://127.0.0.1:6379/0"}}
# `turn_worker` and `run_agent` run on uvloop (when installed); off: asyncio's own loop.
GLOVE_UVLOOP = env("GLOVE_UVLOOP")
# How many turns one worker process runs at once (they wait on the model, not the CPU).
GLOVE_TURN_CONCURRENCY = env("GLOVE_TURN_CONCURRENCY")
# RQ backend: RQ workers (one thread and one Redis connection each) taking turn tasks in one
# `turn_worker` process; they only hand sessions to its event loop.
GLOVE_TURN_RQ_WORKERS = env("GLOVE_TURN_RQ_WORKERS")
# RQ backend: how long a Redis command may take before it fails (an enqueue to a frozen
# Redis then gives up, and the stored turn waits for a worker's sweep). Above the RQ
# workers' 1 s blocking pop.
GLOVE_RQ_SOCKET_TIMEOUT_SECONDS = env("GLOVE_RQ_SOCKET_TIMEOUT_SECONDS")
# Database threads (one connection each) those turns share, per worker process.
GLOVE_TURN_DB_THREADS = env("GLOVE_TURN_DB_THREADS")
# A worker renews the lease of its running turns; a lease this old means the worker died,
# and another worker restarts the turn, at most GLOVE_TURN_MAX_ATTEMPTS times in all.
GLOVE_TURN_LEASE_SECONDS = env("GLOVE_TURN_LEASE_SECONDS")
GLOVE_TURN_MAX_ATTEMPTS = env("GLOVE_TURN_MAX_ATTEMPTS")
# A turn's completion webhook: the key that signs it, and how many times it is tried.
GLOVE_TURN_WEBHOOK_SECRET = env("GLOVE_TURN_WEBHOOK_SECRET")
GLOVE_TURN_WEBHOOK_MAX_ATTEMPTS = env("GLOVE_TURN_WEBHOOK_MAX_ATTEMPTS")
# The longest a start with `?wait=` (and a blocking A2A SendMessage) holds its request.
GLOVE_TURN_WAIT_MAX_SECONDS = env("GLOVE_TURN_WAIT_MAX_SECONDS")
# A turn waiting on a person this long is parked in the database (no worker slot, no
# lease); the answer continues it on any worker. 0 parks at once.
GLOVE_TURN_PARK_AFTER_SECONDS = env("GLOVE_TURN_PARK_AFTER_SECONDS")
# How often a worker looks at the database for answers and cancels, and for new tasks on the
# database queue (SQLite, or PostgreSQL while its LISTEN connection is down).
GLOVE_TURN_POLL_SECONDS = env("GLOVE_TURN_POLL_SECONDS")
# On PostgreSQL an answer, a stop or a task enqueued on the database queue reaches the worker
# by NOTIFY (it LISTENs on one connection of its own); it still looks this often, a safety
# net for a lost notification.
GLOVE_TURN_ANSWER_RECHECK_SECONDS = env("GLOVE_TURN_ANSWER_RECHECK_SECONDS")
# Retention: how long each growing table keeps its rows, applied by the turn worker.
GLOVE_RETENTION_SECONDS = env("GLOVE_RETENTION_SECONDS")
GLOVE_RETENTION_BATCH = env("GLOVE_RETENTION_BATCH")
GLOVE_RETAIN_LIVE_EVENTS_DAYS = env("GLOVE_RETAIN_LIVE_EVENTS_DAYS")
GLOVE_RETAIN_IDEMPOTENCY_KEYS_DAYS = env("GLOVE_RETAIN_IDEMPOTENCY_KEYS_DAYS")
GLOVE_RETAIN_TASK_RESULTS_DAYS = env("GLOVE_RETAIN_TASK_RESULTS_DAYS")
GLOVE_RETAIN_MESH_DAYS = env("GLOVE_RETAIN_MESH_DAYS")
GLOVE_RETAIN_INBOX_CONSUMED_DAYS = env("GLOVE_RETAIN_INBOX_CONSUMED_DAYS")
GLOVE_RETAIN_APPROVALS_DAYS = env("GLOVE_RETAIN_APPROVALS_DAYS")
GLOVE_RETAIN_TURNS_DAYS = env("GLOVE_RETAIN_TURNS_DAYS")
GLOVE_RETAIN_TURN_STEPS_DAYS = env("GLOVE_RETAIN_TURN_STEPS_DAYS")
GLOVE_RETAIN_BUDGET_LEDGER_DAYS = env("GLOVE_RETAIN_BUDGET_LEDGER_DAYS")
GLOVE_RETAIN_LOGIN_RECORDS_DAYS = env("GLOVE_RETAIN_LOGIN_RECORDS_DAYS")
# Live pushes from a turn (text deltas, tool use) give up after this long: a frozen Redis
# slows the live push only; the stored events reach pages through the event log.
GLOVE_LIVE_SEND_TIMEOUT_SECONDS = env("GLOVE_LIVE_SEND_TIMEOUT_SECONDS")
# The workspace inbox: the server's URL as agents reach it (printed into .mcp.json), and the
# largest workspace file the inbox renders or serves (bigger ones are explained, not read).
GLOVE_PUBLIC_URL = env("GLOVE_PUBLIC_URL")
GLOVE_WORKSPACE_FILE_MAX_BYTES = env("GLOVE_WORKSPACE_FILE_MAX_BYTES")
GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES = env("GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES")
# What the inbox page renders: nesting depth and element count checked before sanitising, and
# the most a request waits for a render (docs/reference/settings.md).
GLOVE_WORKSPACE_RENDER_MAX_DEPTH = env("GLOVE_WORKSPACE_RENDER_MAX_DEPTH")
# Images a rendered doc may load from elsewhere (HTTPS only); others become links.
GLOVE_DOC_IMAGE_HOSTS = env("GLOVE_DOC_IMAGE_HOSTS")

# The pages' Content-Security-Policy (Django's own, django.middleware.csp): scripts and styles
# only from this origin, so an injected inline script or style does not run; images from here
# and the hosts above; websockets and fetches to this origin. A view that needs another
# policy says so itself (the API docs' Swagger UI; a workspace file is sandboxed).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:", *(f"https://{host}" for host in GLOVE_DOC_IMAGE_HOSTS)],
    "connect-src": [CSP.SELF],
    "font-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
GLOVE_WORKSPACE_RENDER_MAX_ELEMENTS = env("GLOVE_WORKSPACE_RENDER_MAX_ELEMENTS")
GLOVE_WORKSPACE_RENDER_SECONDS = env("GLOVE_WORKSPACE_RENDER_SECONDS")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # A refused request is one line, a database outage one line (gloveapp/lib/logs.py).
    "filters": {"refusals": {"()": "gloveapp.lib.logs.RefusalFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["refusals"]}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL")},
}
