# Two commands do all set-up: `make run` and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/glove_test

WS_PORT ?= 8001
HTTP_WORKERS ?= 2
HTTP_THREADS ?= 8
WS_WORKERS ?= 1

.PHONY: run serve-prod test install lint format bench clean

$(PY):
	@interp=$$(sh .ci/find-python) || exit 1; \
	echo "Creating $(VENV) with $$interp"; \
	"$$interp" -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# The mesh demo: chats join the mesh on the database transport, and the roastery agent runs
# beside the server as a peer (ask Brew "ask the roastery about Kenya AA").
# HOST and PORT choose where the server listens (`make run PORT=8001`); a taken port is
# reported before anything is set up.
run: install
	@sh .ci/check-port $(HOST) $(PORT) $(PY)
	$(PY) manage.py migrate --noinput
	HOST=$(HOST) PORT=$(PORT) $(PY) manage.py setup_demo
	@# The turn worker and the mesh demo's roastery peer run beside the server; Ctrl-C (or the
	@# server exiting) stops all three.
	@export MESH_TRANSPORT=$${MESH_TRANSPORT:-database} GLOVE_CHAT_MESH=$${GLOVE_CHAT_MESH:-true}; \
	$(PY) manage.py run_agent roastery --mesh-id roastery --capability stock & roastery=$$!; \
	DEBUG=$${DEBUG:-true} $(PY) manage.py turn_worker & worker=$$!; \
	trap 'kill $$roastery $$worker 2>/dev/null; wait $$worker 2>/dev/null' EXIT INT TERM; \
	DEBUG=$${DEBUG:-true} $(VENV)/bin/daphne -b $(HOST) -p $(PORT) gloveapp.asgi:application

# The production topology (README, "Production"): HTTP on gunicorn's threaded WSGI workers
# with persistent connections (no sync/async hop per middleware), websockets on uvicorn
# (ASGI, psycopg's pool), chat turns on a turn worker. A proxy routes /ws/ to WS_PORT and the
# rest to PORT.
# bench/rest.py and bench/live.py start exactly this.
serve-prod: install
	$(PY) manage.py migrate --noinput
	@trap 'kill 0' INT TERM; \
	GLOVE_SERVER=wsgi DB_CONN_MAX_AGE=$${DB_CONN_MAX_AGE:-600} $(VENV)/bin/gunicorn \
		gloveapp.wsgi:application --worker-class gthread --workers $(HTTP_WORKERS) \
		--threads $(HTTP_THREADS) --bind $(HOST):$(PORT) --keep-alive 30 & \
	GLOVE_SERVER=asgi DB_CONN_MAX_AGE=0 $(VENV)/bin/uvicorn gloveapp.asgi:application \
		--host $(HOST) --port $(WS_PORT) --workers $(WS_WORKERS) --ws websockets \
		--lifespan off --no-access-log & \
	DB_CONN_MAX_AGE=0 $(PY) manage.py turn_worker & \
	wait

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache --no-logo

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The whole suite on SQLite, the browser tests in a process of their own (Playwright's
# sync API keeps an event loop that async tests must not share), then the database-backed
# tests again on PostgreSQL.
test: lint
	@bash .ci/ensure-services
	$(VENV)/bin/pytest -m "not browser"
	$(VENV)/bin/pytest -m browser
	DATABASE_URL=$(PG_TEST_URL) $(VENV)/bin/pytest -m "postgres and not browser"

# Every bench/*.py in turn; bench/run_all.py writes bench/results.json and bench/results.md
# and copies the tables into README.md. Run it on a quiet machine.
bench: install
	@bash .ci/ensure-services
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache
