# Two commands do all set-up: `make run` and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
# Two install stamps: `make run` installs what running needs; lint, test and bench add the
# dev extra (pytest, Playwright, ruff...) on top.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
DOCS_STAMP := $(VENV)/.installed-docs
HOST ?= 127.0.0.1
PORT ?= 8000

WS_PORT ?= 8001
HTTP_WORKERS ?= 2
HTTP_THREADS ?= 6
WS_WORKERS ?= 2
TURN_WORKERS ?= 1
# Set to also run nginx there, routing as the production proxy does (try it in a browser).
PROXY_PORT ?=
DOCS_PORT ?= 8002

.PHONY: run serve-prod test test-fast install install-run lint format bench chaos clean docs docs-serve

$(PY):
	@interp=$$(sh .ci/find-python) || exit 1; \
	echo "Creating $(VENV) with $$interp"; \
	"$$interp" -m venv $(VENV)

$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	@touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(DEV_STAMP)

# `make docs` adds only what the site needs (MkDocs), not the test tools.
$(DOCS_STAMP): $(RUN_STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	@touch $(DOCS_STAMP)

install-run: $(RUN_STAMP)

install: $(DEV_STAMP)

# The mesh demo: chats join the mesh on the database transport, and the roastery agent runs
# beside the server as a peer (ask Brew "ask the roastery about Kenya AA").
# HOST and PORT choose where the server listens (`make run PORT=8001`); a taken port is
# reported before anything is set up.
run: install-run
	@sh .ci/check-port $(HOST) $(PORT) $(PY)
	$(PY) manage.py migrate --noinput
	HOST=$(HOST) PORT=$(PORT) $(PY) manage.py setup_demo
	@# Where this server is reached: e-mail links and .mcp.json files name it, and commands
	@# run from another shell (create_workspace) read it from .make-run-url.
	@url=$${GLOVE_PUBLIC_URL:-http://$$(test "$(HOST)" = 0.0.0.0 && echo 127.0.0.1 || echo "$(HOST)"):$(PORT)}; \
	echo "$$url" > .make-run-url
	@# The turn worker and the mesh demo's roastery peer run beside the server; Ctrl-C (or the
	@# server exiting) stops all three.
	@export GLOVE_PUBLIC_URL=$$(cat .make-run-url); \
	export MESH_TRANSPORT=$${MESH_TRANSPORT:-database} GLOVE_CHAT_MESH=$${GLOVE_CHAT_MESH:-true}; \
	$(PY) manage.py run_agent roastery --mesh-id roastery --capability stock & roastery=$$!; \
	DEBUG=$${DEBUG:-true} $(PY) manage.py turn_worker & worker=$$!; \
	trap 'kill $$roastery $$worker 2>/dev/null; wait $$worker 2>/dev/null' EXIT INT TERM; \
	DEBUG=$${DEBUG:-true} $(VENV)/bin/daphne -b $(HOST) -p $(PORT) gloveapp.asgi:application

# The production topology (docs/howto/deploy.md): HTTP on granian's WSGI workers (HTTP in
# Rust, no sync/async hop per middleware; connections from psycopg's pool), websockets and
# /mcp/ on uvicorn (ASGI, the pool too), chat turns on turn workers. A proxy routes /ws/ and
# /mcp/ to WS_PORT and the rest to PORT. granian and uvicorn respawn a crashed worker; when
# a process exits for good, .ci/serve_prod.py stops all of them and exits non-zero, for a
# supervisor to restart (never half up). bench/rest.py and bench/chaos.py start exactly this.
serve-prod: install-run
	$(PY) manage.py migrate --noinput
	@HOST=$(HOST) PORT=$(PORT) WS_PORT=$(WS_PORT) HTTP_WORKERS=$(HTTP_WORKERS) \
		HTTP_THREADS=$(HTTP_THREADS) WS_WORKERS=$(WS_WORKERS) TURN_WORKERS=$(TURN_WORKERS) \
		PROXY_PORT=$(PROXY_PORT) \
		exec $(PY) .ci/serve_prod.py

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The whole suite on SQLite, the browser tests in a process of their own (Playwright's
# sync API keeps an event loop that async tests must not share), and beside them the
# database-backed tests again on PostgreSQL (.ci/test-passes; TEST_WORKERS and FAULT_WORKERS
# spread the passes over pytest-xdist workers). Each run takes a PostgreSQL database and a
# Redis server of its own unless PG_TEST_URL / TEST_REDIS_URL name them.
test: lint
	@bash .ci/ensure-services
	bash .ci/test-passes

# The daily loop: the tests that start no process (no server, worker or command), on SQLite,
# with the local Redis (TEST_REDIS_URL, default db 15). `make test` stays the gate.
test-fast: install
	@bash .ci/ensure-services
	$(VENV)/bin/pytest -m "not process and not postgres" -q -p no:cacheprovider

# The documentation site (mkdocs.yml, docs/): built offline into site/, every warning an error
# and every internal link and anchor checked; the reference's generated parts come from the
# code. `make test` builds it too (tests/suite/test_docs.py).
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The site on http://127.0.0.1:8002 (search needs HTTP), rebuilt as pages change.
docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict -a $(HOST):$(DOCS_PORT)

# Every bench/*.py in turn; bench/run_all.py writes bench/results.json and bench/results.md
# and copies the tables into bench/README.md. Run it on a quiet machine.
bench: install
	@bash .ci/ensure-services
	@bash .ci/ensure-bench-tools
	$(PY) bench/run_all.py

# The routine faults of a deployment, one at a time, under load, on the production topology
# (make serve-prod on a PostgreSQL and a Redis of its own): a table of acknowledged / lost /
# duplicated / stuck / 5xx / heal time, also written into bench/results.json. CHAOS_QUICK=1
# shortens it; CHAOS_FAULTS=postgres_restart,kill_http_worker picks faults (bench/chaos.py).
chaos: install
	@bash .ci/ensure-services
	@bash .ci/ensure-chaos-tools
	$(PY) bench/chaos.py

clean:
	rm -rf $(VENV) .pytest_cache site
