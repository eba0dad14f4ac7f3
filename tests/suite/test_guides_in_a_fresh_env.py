"""Every guide's install commands, run as written in a fresh virtualenv, keep the project
installable: `pip check` is clean after each guide (followed one after another, as a reader
would), and the MCP server docs/howto/agents.md installs answers the project's MCP client.

The virtualenv is seeded from the project's own install (`pip install -e` of this tree, as
`make run` installs it); each guide's shell commands that install packages (`pip install`,
`.venv/bin/pip install`, `python -m pip install`, in code blocks or inline code) then run
literally, with its `pip` the fresh one. The guides' other blocks run in
tests/suite/test_guides_as_written.py; the README's steps in tests/examples/test_fresh_clone.py
and existing-project.md's server lines in tests/suite/test_existing_project.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.test_fresh_clone import newcomer_env

# Mostly waiting on pip: it runs in the pass beside the others (.ci/test-passes).
pytestmark = [pytest.mark.apart, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
GUIDES = sorted([*ROOT.glob("docs/howto/*.md"), *ROOT.glob("docs/tutorial/*.md")])
_PIP = re.compile(
    r"(?:^|[`\s])(?P<command>(?:\.venv/bin/)?(?:pip|python3? -m pip) install [^`\n]+)", re.M
)
# The server entry agents.md gives for its MCP example, read from the page.
_TIME_SERVER = re.compile(r'\{"name": "time", "command": "mcp-server-time"\}')

LIST_TOOLS = """
import asyncio, json
from gloveapp.core.mcp import McpToolbox

async def main():
    async with McpToolbox([{entry}]) as toolbox:
        print(json.dumps([tool.name for tool in toolbox.tools]))

asyncio.run(main())
"""


# The one placeholder a guide asks its reader to fill in: where they cloned the project.
PLACEHOLDERS = {"/path/to/glove-django": str(ROOT)}


def guide_installs(guide: Path) -> list[str]:
    commands = [match["command"].strip() for match in _PIP.finditer(guide.read_text())]
    for placeholder, value in PLACEHOLDERS.items():
        commands = [command.replace(placeholder, value) for command in commands]
    return commands


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("guides") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=newcomer_env())
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "-e", str(ROOT)], check=True, env=newcomer_env(), timeout=600)
    return venv


def pip_check(venv: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "check"],
        capture_output=True,
        text=True,
        env=newcomer_env(),
    )


def test_a_guide_names_its_installs_where_this_test_finds_them():
    installs = {guide.name: guide_installs(guide) for guide in GUIDES}
    assert installs["agents.md"] == ['.venv/bin/pip install "mcp-server-time==2026.8.18"']


@pytest.mark.parametrize("guide", GUIDES, ids=[guide.name for guide in GUIDES])
def test_each_guides_installs_leave_pip_check_clean(fresh_env, guide, tmp_path):
    # The guide's commands as written, run where its `.venv` is the fresh one.
    (tmp_path / ".venv").symlink_to(fresh_env)
    env = {**newcomer_env(), "PATH": f"{fresh_env / 'bin'}:{newcomer_env()['PATH']}"}
    for command in guide_installs(guide):
        ran = subprocess.run(
            command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert ran.returncode == 0, f"{guide.name}: {command}\n{ran.stderr[-3000:]}"
    checked = pip_check(fresh_env)
    assert checked.returncode == 0, f"after {guide.name}: {checked.stdout}{checked.stderr}"


def test_the_mcp_server_agents_md_installs_lists_its_tools(fresh_env, tmp_path):
    guide = ROOT / "docs" / "howto" / "agents.md"
    (tmp_path / ".venv").symlink_to(fresh_env)
    env = {**newcomer_env(), "PATH": f"{fresh_env / 'bin'}:{newcomer_env()['PATH']}"}
    for command in guide_installs(guide):
        subprocess.run(command, shell=True, cwd=tmp_path, env=env, check=True, timeout=600)
    entry = _TIME_SERVER.search(guide.read_text())
    assert entry is not None
    listed = subprocess.run(
        [str(fresh_env / "bin" / "python"), "-c", LIST_TOOLS.format(entry=entry[0])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "time__get_current_time" in listed.stdout, listed.stdout + listed.stderr[-2000:]
