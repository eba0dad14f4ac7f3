"""A newcomer's first command: `make run` in a fresh clone serves its first page, and it
installs what running needs, not the test tools (pytest, Playwright, ruff: the dev extra).
Then the README's step 3, its commands read from the README itself, on the port `make run`
was given: the workspace's `.mcp.json` names that server, stays out of git, and the
example's push (a note and a file) reaches the demo user's inbox. Last, `make docs` builds
the site adding MkDocs only."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port

# Mostly waiting on pip and a server: it runs in the pass beside the others (.ci/test-passes).
pytestmark = [pytest.mark.apart, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
# Installing the runtime dependencies into a new virtualenv takes one to three minutes here.
FIRST_PAGE_WITHIN = 600


def newcomer_env() -> dict[str, str]:
    """The machine's environment, without what the test run set for itself."""
    dropped = {"VIRTUAL_ENV", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("PYTEST")}
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in part + "/"
    )
    return env


def test_make_run_in_a_fresh_clone_serves_the_first_page_without_test_tools(tmp_path):
    clone = tmp_path / "glove-django"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    port = free_port()
    log = open(tmp_path / "make-run.log", "wb")
    run = subprocess.Popen(
        ["make", "run", f"PORT={port}"],
        cwd=clone,
        env=newcomer_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the server, worker and peer stop with it
    )
    try:
        deadline = time.monotonic() + FIRST_PAGE_WITHIN
        status = None
        while time.monotonic() < deadline and run.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
                if status.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        output = (tmp_path / "make-run.log").read_text(errors="replace")
        assert status is not None and status.status_code == 200, output[-4000:]
        assert "glove-django demo is ready." in output
        assert "/inbox/" in output  # the banner shows the way to the workspace inbox

        venv = clone / ".venv"
        site = next(venv.glob("lib/python*/site-packages"))
        assert (venv / ".installed-run").exists()
        assert not (venv / ".installed-dev").exists()
        for test_tool in ("pytest", "playwright", "ruff", "schemathesis", "importlinter"):
            assert not (site / test_tool).exists(), f"make run installed {test_tool}"
        assert (site / "django").exists() and (site / "daphne").exists()

        follow_readme_step_3(clone, port)

        # `make docs` adds MkDocs, still without the test tools.
        docs = in_clone(clone, ["make", "docs"], timeout=600)
        assert docs.returncode == 0, docs.stdout[-3000:] + docs.stderr[-3000:]
        assert (clone / "site" / "index.html").exists()
        assert (site / "mkdocs").exists() and (site / "material").exists()
        for test_tool in ("pytest", "playwright", "ruff", "schemathesis"):
            assert not (site / test_tool).exists(), f"make docs installed {test_tool}"
    finally:
        stop_group(run)
        log.close()


def stop_group(run: subprocess.Popen) -> None:
    """Stop `make run` and every process of its group, even when make itself is gone (its
    server and worker outlived it once and ran on through the rest of the suite)."""

    def group_alive() -> bool:
        try:
            os.killpg(run.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    if group_alive():
        os.killpg(run.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while group_alive() and time.monotonic() < deadline:
        run.poll()  # reap make, so its entry does not keep the group "alive"
        time.sleep(0.2)
    if group_alive():
        os.killpg(run.pid, signal.SIGKILL)
    run.wait()


def readme_step_3(clone: Path) -> list[list[str]]:
    readme = (clone / "README.md").read_text()
    step = readme[readme.index("3. **Workspace inbox.**") : readme.index("4. **Mesh.**")]
    return [shlex.split(command) for command in re.findall(r"`(\.venv/bin/python [^`]+)`", step)]


def in_clone(clone: Path, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=clone, env=newcomer_env(), capture_output=True, text=True, timeout=timeout
    )


def follow_readme_step_3(clone: Path, port: int) -> None:
    create, push = readme_step_3(clone)
    made = in_clone(clone, create)
    assert made.returncode == 0, made.stderr
    server = json.loads((clone / ".mcp.json").read_text())["mcpServers"]["glove-workspace"]
    assert server["url"].startswith(f"http://127.0.0.1:{port}/mcp/ws-")
    status = in_clone(clone, ["git", "status", "--porcelain"]).stdout
    assert ".mcp.json" not in status and ".make-run-url" not in status, status

    pushed = in_clone(clone, push)
    assert pushed.returncode == 0, pushed.stderr
    answer = json.loads(pushed.stdout)["pushed"]
    assert answer["ok"] is True, answer

    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as browser:
        login = browser.get("/accounts/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)[1]
        browser.post(
            "/accounts/login/",
            data={"username": "demo", "password": "demo-coffee", "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"http://127.0.0.1:{port}/accounts/login/"},
        )
        inbox = browser.get("/inbox/")
    assert inbox.status_code == 200 and "/accounts/login/" not in str(inbox.url)
    assert "the overview is in README.md" in inbox.text

    again = in_clone(clone, create)
    assert again.returncode != 0 and "--force" in again.stderr
    replaced = in_clone(clone, [*create, "--force"])
    assert replaced.returncode == 0, replaced.stderr
    renewed = json.loads((clone / ".mcp.json").read_text())["mcpServers"]["glove-workspace"]
    assert renewed["headers"] != server["headers"]  # a new workspace, its own token
