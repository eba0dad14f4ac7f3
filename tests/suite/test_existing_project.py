"""The apps in someone else's project, as docs/howto/existing-project.md says to add them.

A fresh `django-admin startproject mysite` in a temporary folder gets the how-to's settings
(appended to its own), its urls.py and its asgi.py, read from the page itself, so the page
and the test cannot drift apart. Then, in processes of that project on its own SQLite file:
`migrate`, a `turn_worker`, and a script that drives the mounted routes (/glove/,
/glove/api/) as a customer and a member of staff would: a chat turn, an inbox item resolved
over REST, and the next turn that reads it. Then the page's "Run it" lines as written: the
first user made by `createsuperuser`, the page's Daphne line serving the project, whose
login page, static files and chat list a browser then gets.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
HOWTO = ROOT / "docs" / "howto" / "existing-project.md"
FENCE = re.compile(r"```python\n(# (settings|urls|asgi)\.py[^\n]*\n.*?)```", re.DOTALL)
RUN_IT = re.compile(r"## 4\. Run it\s+(?:<!--.*?-->\s+)?```sh\n(.*?)```", re.DOTALL)

# Drives the project through Django's test client, in the project's own process.
DRIVE = r"""
import json, os, time

import django

django.setup()

from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token

from gloveapp.conversations.models import Message, Session
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.turns.selectors import is_busy
from inbox.models import InboxItem
from inbox.services import inbox_item_add

import mysite.asgi  # the websocket routing builds

User = get_user_model()
ada = User.objects.create_user("ada", password="not-used")
sam = User.objects.create_user("sam", password="not-used", is_staff=True)
token = Token.objects.create(user=sam).key
out = {}


def wait_for_the_turn(session_id):
    deadline = time.monotonic() + 120
    while is_busy(session_id):
        if time.monotonic() > deadline:
            raise SystemExit("the turn worker did not run the turn")
        time.sleep(0.1)


def last_reply(session_id):
    return Message.objects.filter(session_id=session_id, sender="agent").latest("seq").text


customer = Client(HTTP_HOST="localhost")
customer.force_login(ada)
out["chat_list"] = customer.get("/glove/").status_code
created = customer.post("/glove/sessions/new")
chat_url = created["Location"]
out["chat_url"] = chat_url
session = Session.objects.get(owner=ada)
sent = customer.post(chat_url + "messages", {"text": "What's on the menu?"})
out["sent"] = sent.status_code
wait_for_the_turn(session.pk)
out["first_reply"] = last_reply(session.pk)
page = customer.get(chat_url)
out["chat_page"] = page.status_code
html = page.content.decode()
out["page_posts_to"] = sorted(set(re.findall(r'(?<![\w-])(?:action|hx-post)="([^"]*)"', html)))

item = inbox_item_add(
    session_id=session.pk,
    item=CoreInboxItem(id="inbox_1_ask", tag="ask_the_roaster", request="When is Kenya AA back?"),
)
staff = Client(HTTP_HOST="localhost")
resolved = staff.post(
    "/glove/api/inbox/resolve",
    data=json.dumps({"itemId": item.pk, "response": "Kenya AA is back: 12 bags"}),
    content_type="application/json",
    HTTP_AUTHORIZATION=f"Token {token}",
)
out["resolve"] = [resolved.status_code, resolved.json()]
listed = staff.get("/glove/api/sessions", HTTP_AUTHORIZATION=f"Token {token}")
out["api_sessions"] = listed.status_code
# The API's own error body and chat rate, whatever the project's REST_FRAMEWORK says.
refused = staff.post(
    "/glove/api/chat", data="{}", content_type="application/json",
    HTTP_AUTHORIZATION=f"Token {token}",
)
out["api_refusal"] = [refused.status_code, sorted(refused.json())]
customer.post(chat_url + "messages", {"text": "anything new?"})
wait_for_the_turn(session.pk)
out["second_reply"] = last_reply(session.pk)
out["item_status"] = InboxItem.objects.get(pk=item.pk).status
print("RESULT " + json.dumps(out))
""".replace("import json, os, time", "import json, os, re, time")


def howto_files() -> dict[str, str]:
    found = {name: code for code, name in FENCE.findall(HOWTO.read_text())}
    assert set(found) == {"settings", "urls", "asgi"}, "the how-to lost a file's code block"
    return found


def run_it_lines() -> list[list[str]]:
    """The page's "Run it" block, each line's command without its comment or `&`."""
    block = RUN_IT.search(HOWTO.read_text())
    assert block, "the how-to lost its Run it block"
    lines = [
        line.split("#", 1)[0].strip().removesuffix("&").strip() for line in block[1].splitlines()
    ]
    return [shlex.split(line) for line in lines if line]


def run(site: Path, *args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=site, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A new project made by `startproject`, with what the how-to says to add."""
    site = tmp_path / "site"
    site.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "GLOVE_", "DATABASE_", "REDIS_", "MESH_"))
    }
    env |= {"DJANGO_SETTINGS_MODULE": "mysite.settings", "PYTHONPATH": str(site)}
    # As in an activated virtual environment: its console scripts (daphne) on the PATH.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    run(site, "-m", "django", "startproject", "mysite", str(site), env=env)
    files = howto_files()
    settings = site / "mysite" / "settings.py"
    settings.write_text(settings.read_text() + "\n\n" + files["settings"])
    (site / "mysite" / "urls.py").write_text(files["urls"])
    (site / "mysite" / "asgi.py").write_text(files["asgi"])
    (site / "drive.py").write_text(DRIVE)
    return site, env


@pytest.mark.process
@pytest.mark.timeout(900)
def test_it_runs_a_chat_turn_and_a_resolution_in_a_project_of_its_own(project):
    site, env = project
    run(site, "manage.py", "check", env=env)
    run(site, "manage.py", "migrate", "--noinput", env=env)
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "turn_worker"],
        cwd=site,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        output = run(site, "drive.py", env=env)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    result = json.loads(output.split("RESULT ", 1)[1])

    assert result["chat_list"] == 200
    assert result["chat_url"].startswith("/glove/sessions/")
    assert result["sent"] == 303
    assert "menu" in result["first_reply"]
    assert result["chat_page"] == 200
    # The page's forms post to the routes where this project mounted them.
    assert result["page_posts_to"]
    assert all(
        url.startswith("/glove/") or url == "/accounts/logout/" for url in result["page_posts_to"]
    ), result["page_posts_to"]
    assert result["resolve"] == [200, {"ok": True, "itemId": "inbox_1_ask"}]
    assert result["api_sessions"] == 200
    assert result["api_refusal"] == [400, ["details", "error", "field"]]
    assert "Kenya AA is back: 12 bags" in result["second_reply"]
    assert result["item_status"] == "consumed"


@pytest.mark.process
@pytest.mark.timeout(600)
def test_its_run_lines_serve_the_login_page_static_files_and_the_chats(project):
    site, env = project
    commands = run_it_lines()
    assert [c[:3] for c in commands[:3]] == [
        ["python", "manage.py", "migrate"],
        ["python", "manage.py", "createsuperuser"],
        ["python", "manage.py", "turn_worker"],
    ]
    serve = commands[3]
    assert serve[0] == "daphne"
    run(site, *commands[0][1:], "--noinput", env=env)
    # createsuperuser as the page says, its answers given as Django reads them unattended.
    first_user = {
        "DJANGO_SUPERUSER_USERNAME": "owner",
        "DJANGO_SUPERUSER_EMAIL": "owner@example.com",
        "DJANGO_SUPERUSER_PASSWORD": "a-first-login-9",
    }
    run(site, *commands[1][1:], "--noinput", env=env | first_user)
    port = free_port()
    server = subprocess.Popen(
        [*serve[:-1], "-p", str(port), serve[-1]],
        cwd=site,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and server.poll() is None, "daphne did not start"
                time.sleep(0.2)
        with httpx.Client(base_url=base, timeout=30, follow_redirects=True) as browser:
            login = browser.get("/glove/")
            assert login.status_code == 200, login.text[-2000:]
            assert str(login.url).startswith(f"{base}/accounts/login/")
            styles = re.findall(r'href="(/static/[^"]+\.css)"', login.text)
            scripts = re.findall(r'src="(/static/[^"]+\.js)"', login.text)
            assert styles
            for asset in styles + scripts:
                assert browser.get(asset).status_code == 200, asset
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)[1]
            chats = browser.post(
                str(login.url),
                data={
                    "username": "owner",
                    "password": "a-first-login-9",
                    "csrfmiddlewaretoken": csrf,
                    "next": "/glove/",
                },
                headers={"Referer": str(login.url)},
            )
            assert chats.status_code == 200
            assert str(chats.url) == f"{base}/glove/"
            assert "New chat" in chats.text
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
