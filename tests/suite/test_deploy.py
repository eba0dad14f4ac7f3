"""Production: the documented settings pass `check --deploy`, and a server with DEBUG off
serves the app's own CSS and JS (WhiteNoise) and sends the security headers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.liveserver import LiveServer

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = ROOT / "examples" / "production.env"


def production_env() -> dict[str, str]:
    values = {}
    for line in PRODUCTION_ENV.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


@pytest.mark.process
@pytest.mark.parametrize("tasks_backend", ["db", "rq"])
def test_it_passes_check_deploy_under_the_documented_production_settings(tmp_path, tasks_backend):
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DEBUG", "DATABASE_URL"}},
        **production_env(),
        # The check needs no database: keep it off the example's host.
        "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
        # The database queue, or RQ at scale (its backend's check wants django-rq's app).
        "GLOVE_TASKS_BACKEND": tasks_backend,
    }

    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


@pytest.fixture(scope="module")
def production_server():
    with LiveServer(extra_env={"DEBUG": "0"}) as server:
        yield server


def _static_paths(page: str) -> list[str]:
    import re

    return re.findall(r'(?:href|src)="(/static/[^"]+\.(?:css|js))"', page)


@pytest.mark.process
def test_it_serves_the_apps_css_and_js_with_debug_off(production_server):
    with httpx.Client(base_url=production_server.url, timeout=10) as client:
        page = client.get("/accounts/login/")
        assets = _static_paths(page.text)
        answers = {path: client.get(path) for path in assets}

    assert page.status_code == 200
    assert any(path.endswith(".css") for path in assets)
    assert any(path.endswith(".js") for path in assets)
    for path, answer in answers.items():
        assert answer.status_code == 200, path
        assert answer.content
    css = next(a for p, a in answers.items() if p.endswith(".css"))
    assert css.headers["content-type"].startswith("text/css")


@pytest.mark.process
def test_it_sends_the_security_headers(production_server):
    with httpx.Client(base_url=production_server.url, timeout=10) as client:
        page = client.get("/accounts/login/")

    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "same-origin"
    assert page.headers["cross-origin-opener-policy"] == "same-origin"
