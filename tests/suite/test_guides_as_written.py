"""Every guide's code blocks, run as written, one test per guide, each in a fresh environment.

A guide's environment is a new folder where its reader stands: the project's `manage.py`, a
`.venv` (this one, which test_guides_in_a_fresh_env.py installs fresh), a SQLite database
migrated with the demo data (`setup_demo`, as `make run` has), and a settings module made
of the project's settings and the guide's settings blocks. docs/howto/existing-project.md
gets a new `django-admin startproject mysite` instead, its files from the page.

Then, in the guide's order (tests/suite/guide_blocks.py says how a block is read): its files
are written, its settings blocks are checked with `manage.py check`, a server (Daphne and a
turn worker, as `make run`) starts when a block talks to one, and its python and shell
blocks run (tests/suite/run_guide_blocks.py). Only the documented placeholders below are
replaced. A block that fails fails its guide's test; fix the guide (or the product).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.api.liveserver import free_port
from tests.suite.guide_blocks import GUIDES, ROOT, Block, blocks

pytestmark = [pytest.mark.apart, pytest.mark.process, pytest.mark.timeout(600)]

VENV = Path(sys.executable).parents[1]
RUNNER = Path(__file__).with_name("run_guide_blocks.py")
WEBHOOK_SECRET = secrets.token_urlsafe(24)
# What the guides ask their reader to fill in or assume, and nothing else: the server's
# address (`make run`'s, a deployment's), the webhook secret the server was given.
PLACEHOLDERS = {
    "http://127.0.0.1:8000": "{server}",
    "https://shop.example": "{server}",
    "the GLOVE_WEBHOOK_SECRET": WEBHOOK_SECRET,
}
# Names a guide's Python uses for what its shell blocks printed (step 1's token).
NAMES = {"token": "TOKEN", "TOKEN": "TOKEN"}
# What a guide's Python assumes its reader has built (the tutorial's Glove), run first.
A_GLOVE = """
from gloveapp.core import CompactionConfig, Glove, MemoryStore, ScriptedModel

glove = Glove(
    store=MemoryStore("guide"),
    model=ScriptedModel(["Done."] * 5),
    system_prompt="You are Brew, a coffee shop assistant.",
    compaction_config=CompactionConfig(compaction_instructions="Summarize the conversation."),
).build()
"""
GIVEN_PYTHON = {"howto/agents.md": A_GLOVE, "howto/approvals.md": A_GLOVE}
# What a guide assumes its reader already has, made before its blocks run.
GIVEN = {
    "howto/resolve-inbox-items.md": """
from gloveapp.conversations.models import Session
from gloveapp.core.types import InboxItem
from inbox.services import inbox_item_add

session = Session.objects.filter(owner__username="demo").first()
inbox_item_add(
    session_id=session.pk,
    item=InboxItem(id="inbox_1711900000000_abc123", tag="restock_watch", request="Kenya AA?"),
)
""",
}
SETTINGS_PRELUDE = '''"""The project's settings and a guide's settings blocks."""
from gloveapp.settings import *  # noqa: F403


def _merge_into(value, keys, part):
    for key in keys[:-1]:
        value = value[key]
    entry = value[keys[-1]] if keys else value
    if isinstance(entry, str):
        entry = {"factory": entry}
    entry = {**entry, **part}
    if keys:
        value[keys[-1]] = entry
    else:
        value.clear()
        value.update(entry)

'''
CURLRC = "fail-with-body\nshow-error\nmax-time = 60\n"


def clean_env() -> dict[str, str]:
    """The machine's environment without the test run's own settings."""
    kept = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "GLOVE_", "DATABASE_", "REDIS_", "MESH_", "PYTEST"))
        and key not in {"PYTHONPATH", "VIRTUAL_ENV", "DEBUG", "SECRET_KEY"}
    }
    kept["GLOVE_PASSWORD_HASHERS"] = "django.contrib.auth.hashers.MD5PasswordHasher"
    return kept


@pytest.fixture(scope="module")
def demo_database(tmp_path_factory) -> Path:
    """A SQLite file migrated with the demo data, copied into each guide's environment."""
    path = tmp_path_factory.mktemp("guides-db") / "demo.sqlite3"
    env = clean_env() | {"DATABASE_URL": f"sqlite:///{path}", "SECRET_KEY": "x" * 50}
    for command in (["migrate", "--noinput"], ["setup_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return path


class Environment:
    """A guide's folder, its settings module and, when asked, its server."""

    def __init__(self, guide: Path, folder: Path, database: Path) -> None:
        self.guide = guide
        self.folder = folder
        self.settings_package = folder
        self.settings_file = folder / "guide_settings.py"
        self.server_url = ""
        self.processes: list[subprocess.Popen] = []
        self.written: set[Path] = set()
        self.snapshots: list[str] = []
        folder.mkdir()
        (folder / ".venv").symlink_to(VENV)
        (folder / ".curlrc").write_text(CURLRC)
        self.env = clean_env() | {
            "HOME": str(folder),
            "PATH": os.pathsep.join([str(VENV / "bin"), os.environ.get("PATH", "")]),
            "PYTHONPATH": str(folder),
            "PYTHONUNBUFFERED": "1",
            "SECRET_KEY": secrets.token_hex(32),
            "GLOVE_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "GLOVE_MODEL": "",
        }
        if guide.name == "existing-project.md":
            self.env |= {"DJANGO_SETTINGS_MODULE": "mysite.settings"}
            self.run(["-m", "django", "startproject", "mysite", str(folder)])
            self.settings_package = folder / "mysite"
            self.settings_file = folder / "mysite" / "settings.py"
        else:
            shutil.copyfile(ROOT / "manage.py", folder / "manage.py")
            shutil.copyfile(database, folder / "db.sqlite3")
            self.settings_file.write_text(SETTINGS_PRELUDE)
            self.env |= {
                "DJANGO_SETTINGS_MODULE": "guide_settings",
                "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
            }

    def run(self, args: list[str], env: dict | None = None, what: str = "") -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=self.folder,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{what or ' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    def write_file(self, block: Block) -> None:
        path = self.folder / block.file if "/" in block.file else self.settings_package / block.file
        path.parent.mkdir(parents=True, exist_ok=True)
        # A file's first block makes it (urls.py replaces startproject's), the next add to it.
        path.write_text(
            path.read_text() + "\n\n" + block.code if path in self.written else block.code
        )
        self.written.add(path)

    def add_settings(self, block: Block) -> None:
        """The block into the settings module, and a copy of the settings as of it."""
        settings = self.settings_file.read_text() + "\n\n" + block.settings_code()
        self.settings_file.write_text(settings)
        snapshot = f"settings_as_of_line_{block.line}"
        (self.folder / f"{snapshot}.py").write_text(settings)
        self.snapshots.append(snapshot)

    def check_settings(self) -> None:
        """`manage.py check` of the settings as of each settings block, in one process."""
        if self.snapshots:
            self.run([str(RUNNER), "--check", *self.snapshots], what="manage.py check")

    def start_server(self) -> None:
        port = free_port()
        self.server_url = f"http://127.0.0.1:{port}"
        logs = self.folder / "logs"
        logs.mkdir(exist_ok=True)
        for name, args in (
            (
                "server",
                [str(VENV / "bin" / "daphne"), "-p", str(port), "gloveapp.asgi:application"],
            ),
            ("worker", [sys.executable, "manage.py", "turn_worker"]),
        ):
            with open(logs / f"{name}.log", "wb") as log:  # the process keeps its own copy
                self.processes.append(
                    subprocess.Popen(
                        args, cwd=self.folder, env=self.env, stdout=log, stderr=subprocess.STDOUT
                    )
                )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.server_url}/api/schema/", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, self.logs()
            assert all(process.poll() is None for process in self.processes), self.logs()
            time.sleep(0.2)

    def logs(self) -> str:
        folder = self.folder / "logs"
        if not folder.exists():
            return ""
        return "\n".join(
            f"== {log.name}\n{log.read_text(errors='replace')[-3000:]}"
            for log in sorted(folder.iterdir())
        )

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def substituted(self, code: str) -> str:
        for placeholder, value in PLACEHOLDERS.items():
            code = code.replace(placeholder, value.format(server=self.server_url))
        return code


def talks_to_a_server(block: Block) -> bool:
    return any(
        placeholder in block.code
        for placeholder, value in PLACEHOLDERS.items()
        if "{server}" in value
    )


def test_every_block_of_every_guide_is_run_or_marked():
    problems = []
    for guide in GUIDES:
        for block in blocks(guide):
            try:
                block.kind  # noqa: B018 - raises for a block neither run nor marked
            except ValueError as problem:
                problems.append(str(problem))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("guide", GUIDES, ids=[guide.name for guide in GUIDES])
def test_a_guides_blocks_run_as_written(guide, demo_database, tmp_path):
    environment = Environment(guide, tmp_path / "site", demo_database)
    runs = []
    try:
        for block in blocks(guide):
            kind = block.kind
            if kind == "file":
                environment.write_file(block)
            elif kind == "settings":
                environment.add_settings(block)
            elif kind in ("python", "shell"):
                runs.append(block)
        environment.check_settings()
        if not runs:
            return
        if any(talks_to_a_server(block) for block in runs):
            environment.start_server()
        given = GIVEN.get(str(guide.relative_to(ROOT / "docs")))
        if given:
            environment.run(["manage.py", "shell", "-c", given], what="the guide's given")
        name = str(guide.relative_to(ROOT / "docs"))
        spec = {
            "names": NAMES,
            "given": [
                {"kind": "python", "where": f"{name}: given", "code": code, "source": ""}
                for code in [GIVEN_PYTHON.get(name)]
                if code
            ],
            "blocks": [
                {
                    "kind": block.kind,
                    "where": block.where,
                    "code": environment.substituted(block.code),
                    "source": block.source,
                }
                for block in runs
            ],
        }
        (tmp_path / "blocks.json").write_text(json.dumps(spec))
        ran = subprocess.run(
            [sys.executable, str(RUNNER), str(tmp_path / "blocks.json")],
            cwd=environment.folder,
            env=environment.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ran.returncode == 0, (
            f"{ran.stdout[-4000:]}\n{ran.stderr[-4000:]}\n{environment.logs()}"
        )
        left = json.loads(ran.stdout.rsplit("ENV ", 1)[1])
        # Settings the guide's shell blocks set (GLOVE_BUDGETS=…): the project checks them.
        told = {
            key: value
            for key, value in left.items()
            if key.startswith(("GLOVE_", "OTEL_")) and environment.env.get(key) != value
        }
        if told:
            environment.run(
                ["manage.py", "check"],
                env=environment.env | told,
                what=f"{guide.name}: manage.py check with {sorted(told)}",
            )
    finally:
        environment.stop()
