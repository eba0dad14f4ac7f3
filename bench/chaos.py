"""`make chaos`: the routine faults of a deployment, one at a time, under load, on the
production topology; what each did to acknowledged work, in a table.

The topology is `make serve-prod` (granian with two HTTP workers, uvicorn with two websocket
workers, two turn workers) on a PostgreSQL and a Redis this script starts on free ports of
its own (tests/servers.py), a `run_agent` mesh peer on the Redis mesh,
and the offline demo model (scripted: no API key). This script is their supervisor, as
systemd would be (docs/howto/deploy.md): when `make serve-prod` or the peer exits, it is
started again two seconds later.

For each fault, fresh chats get messages posted through the pages (as a browser does) and
websockets are opened, before, during and after the fault; then the script waits for every
acknowledged message to be answered and counts, from the database:

- acknowledged: posts the server answered 303 (stored, a turn queued);
- lost: acknowledged, but no turn and no stored message;
- duplicated: a message, turn or reply stored more than once (or a burst past the bound);
- stuck: acknowledged, but not answered when the wait ended (the lease plus 60 s);
- 5xx: HTTP posts and websocket handshakes answered with a 5xx;
- heal: seconds from the end of the fault until a new message (of a chat of its own) is
  acknowledged and answered;
- settled: seconds from the end of the fault until every acknowledged message is answered.

Faults are small classes (`FAULTS`); `--faults a,b` picks some. `CHAOS_QUICK=1` (or
`--quick`) shortens every phase, for the suite. The table is printed and written
into bench/results.json and bench/results.md (this script's rows only; other benches' stay).
Exits 1 unless every fault lost, duplicated and left stuck nothing.

    .venv/bin/python bench/chaos.py [--quick] [--faults postgres_restart,kill_http_worker]
        [--results bench/results.json]      # or CHAOS_QUICK=1 CHAOS_FAULTS=... CHAOS_RESULTS=...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402
from bench.lib.report import goal  # noqa: E402
from tests.healing.serve_prod import ServeProd  # noqa: E402
from tests.servers import PostgresServer, RedisServer, pg_bindir  # noqa: E402

PASSWORD = "chaos-pw-1-not-a-secret"
LEASE_SECONDS = 15.0
QUEUE_BOUND = 5
BURST = 20
MESH_PEER = "roastery"
OUT = ROOT / "bench" / "out"  # git-ignored: the odd cases' chats, message by message
ROUND_WAIT = 3.0  # seconds a chat waits for its answer before posting the next anyway
STARTED = time.monotonic()


@dataclass
class Timing:
    """How long each phase lasts (seconds); quick mode divides the long ones."""

    before: float = 5.0
    after: float = 10.0
    redis_down: float = 10.0
    redis_frozen: float = 20.0
    settle: float = LEASE_SECONDS + 60.0
    bursts: int = 20
    retries: int = 20
    mesh_frames: int = 20
    chats: int = 6

    @classmethod
    def quick(cls) -> Timing:
        return cls(
            before=2.0,
            after=3.0,
            redis_down=3.0,
            redis_frozen=3.0,
            bursts=3,
            retries=4,
            mesh_frames=3,
            chats=3,
        )


def say(text: str) -> None:
    print(f"chaos: [{time.monotonic() - STARTED:6.1f} s] {text}", file=sys.stderr, flush=True)


# -- a logged-in user ---------------------------------------------------------------------------
class Browser:
    """One logged-in user of the HTTP server: cookies and CSRF, as a form post sends them."""

    def __init__(self, url: str, username: str, timeout: float = 60.0) -> None:
        self.url = url
        self.client = httpx.Client(base_url=url, timeout=10, follow_redirects=False)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._login(username)
                return
            except (httpx.HTTPError, AssertionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _login(self, username: str) -> None:
        page = self.client.get("/accounts/login/")
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert match, f"no CSRF token on the login page ({page.status_code})"
        done = self.client.post(
            "/accounts/login/",
            data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": match[1]},
        )
        assert done.status_code == 302, f"login failed: {done.status_code}"

    def post(self, path: str, data: dict, **kwargs) -> httpx.Response:
        token = self.client.cookies.get("csrftoken")
        return self.client.post(path, data={**data, "csrfmiddlewaretoken": token}, **kwargs)

    def new_session(self) -> str:
        for _ in range(50):
            with contextlib.suppress(httpx.HTTPError):
                response = self.post("/sessions/new", {})
                if response.status_code == 303:
                    return response.headers["Location"].strip("/").split("/")[-1]
            time.sleep(0.5)
        raise RuntimeError("could not open a chat")

    def cookie_header(self) -> str:
        return "; ".join(f"{name}={value}" for name, value in self.client.cookies.items())

    def close(self) -> None:
        self.client.close()


# -- the rig: servers, the stack, its supervisor --------------------------------------------------
class Rig:
    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.pg = PostgresServer(max_connections=300)
        self.redis = RedisServer()
        self.stack: ServeProd | None = None
        self.peer: subprocess.Popen | None = None
        self.restarts = Counter()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.secret = secrets.token_hex(32)

    # lifecycle
    def start(self) -> None:
        say("starting PostgreSQL and Redis")
        self.pg.start()
        self.pg.execute("CREATE DATABASE glove_chaos")
        self.database_url = self.pg.url("glove_chaos")
        self.redis.start()
        self.env = {
            "REDIS_URL": self.redis.url(0),
            "SECRET_KEY": self.secret,
            "GLOVE_MAX_QUEUED_MESSAGES": str(QUEUE_BOUND),
            "GLOVE_TURNS_PER_USER_PER_MINUTE": "1000000",
            "GLOVE_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
        }
        say("starting make serve-prod (2 HTTP workers, 2 websocket workers, 2 turn workers)")
        self.stack = self._new_stack().start()
        self.manage(
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; U = get_user_model()\n"
            "for name in ('chaos', 'probe', 'burst'):\n"
            f"    U.objects.create_user(name, password={PASSWORD!r})",
        )
        self._start_peer()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)
        self._supervisor.start()

    def stop(self) -> None:
        self._stop.set()
        if self.peer is not None and self.peer.poll() is None:
            self.peer.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.peer.wait(timeout=20)
            if self.peer.poll() is None:
                self.peer.kill()
        if self.stack is not None:
            self.stack.stop()
        self.redis.stop()
        self.pg.destroy()

    def _new_stack(self, like: ServeProd | None = None) -> ServeProd:
        return ServeProd(
            database_url=self.database_url,
            http_workers=2,
            ws_workers=2,
            turn_workers=2,
            extra_env=self.env,
            port=like.port if like else None,
            ws_port=like.ws_port if like else None,
        )

    def _start_peer(self) -> None:
        self._peer_log = open(self.stack.folder / "peer.log", "ab")
        self.peer = subprocess.Popen(
            [sys.executable, "manage.py", "run_agent", MESH_PEER, "--mesh-id", MESH_PEER],
            cwd=ROOT,
            env={
                **self.stack.env,
                "MESH_TRANSPORT": "redis",
                "MESH_REDIS_URL": self.redis.url(1),
            },
            stdout=self._peer_log,
            stderr=subprocess.STDOUT,
        )

    def _supervise(self) -> None:
        """Restart=always, RestartSec=2: what exits is started again."""
        while not self._stop.wait(0.5):
            with self._lock:
                stack = self.stack
                if stack is not None and stack.process is not None:
                    if stack.process.poll() is not None:
                        code = stack.process.returncode
                        say(f"make serve-prod exited {code}; restarting it in 2 s")
                        self.restarts["serve-prod"] += 1
                        stack.stop()
                        time.sleep(2)
                        replacement = self._new_stack(like=stack)
                        try:
                            self.stack = replacement.start()
                        except RuntimeError as error:
                            say(f"restart failed ({error}); trying again")
                            self.stack = replacement
                if self.peer is not None and self.peer.poll() is not None:
                    self.restarts["run_agent"] += 1
                    tail = (self.stack.folder / "peer.log").read_text(errors="replace")
                    last = " | ".join(tail.strip().splitlines()[-3:])
                    say(f"run_agent exited {self.peer.returncode} ({last}); restarting it")
                    time.sleep(2)
                    self._start_peer()

    def manage(self, *args: str) -> str:
        return self.stack.manage(*args, timeout=120)

    @property
    def url(self) -> str:
        return self.stack.url

    @property
    def ws_url(self) -> str:
        return self.stack.ws_url.replace("http://", "ws://")

    def query(self, sql: str, *args: object) -> list[tuple]:
        with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, args).fetchall()

    def wait_up(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stack = self.stack
            if stack is not None and stack.answers(stack.url):
                return
            time.sleep(0.2)
        raise RuntimeError("the stack did not come back")


# -- load -------------------------------------------------------------------------------------
@dataclass
class Tally:
    label: str = "load"
    acknowledged: dict[str, list[str]] = field(default_factory=dict)  # session -> texts
    unacknowledged: list[str] = field(default_factory=list)  # sent, no answer (timeout...)
    statuses: Counter = field(default_factory=Counter)
    server_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, session: str, text: str, outcome: int | str) -> None:
        with self.lock:
            self.statuses[outcome] += 1
            if outcome == 303:
                self.acknowledged.setdefault(session, []).append(text)
            elif isinstance(outcome, int) and outcome >= 500:
                self.server_errors += 1
            elif outcome in ("ReadTimeout", "RemoteProtocolError", "ReadError"):
                self.unacknowledged.append(text)

    @property
    def count(self) -> int:
        return sum(len(texts) for texts in self.acknowledged.values())


def post_message(browser: Browser, session: str, text: str, **kwargs) -> int | str:
    try:
        return browser.post(f"/sessions/{session}/messages", {"text": text}, **kwargs).status_code
    except httpx.HTTPError as error:
        return type(error).__name__


class Load:
    """Chats posted to in turn (a message after the previous one is acknowledged), and
    websocket handshakes to them, until stopped."""

    def __init__(self, rig: Rig, label: str, chats: int) -> None:
        self.rig, self.label = rig, label
        self.browser = Browser(rig.url, "chaos")
        self.sessions = [self.browser.new_session() for _ in range(chats)]
        self.tally = Tally(label)
        self.handshakes: Counter = Counter()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._post,
                args=(Browser(rig.url, "chaos"), self.sessions[i::2]),
                daemon=True,
            )
            for i in range(2)
        ] + [threading.Thread(target=self._sockets, daemon=True)]

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _post(self, browser: Browser, sessions: list[str]) -> None:
        """A message to each chat, then the next round once they are answered (or after
        ROUND_WAIT s, so a fault meets posts all along): steady load that does not pile up
        a backlog, so the heal time is the fault's, not a queue's."""
        number = 0
        try:
            while not self._stop.is_set():
                sent = []
                for session in sessions:
                    number += 1
                    text = f"show me the menu [{self.label} {session[-6:]} {number}]"
                    outcome = post_message(browser, session, text)
                    self.tally.record(session, text, outcome)
                    if outcome == 303:
                        sent.append(text)
                deadline = time.monotonic() + ROUND_WAIT
                while sent and time.monotonic() < deadline and not self._stop.is_set():
                    with contextlib.suppress(psycopg.Error):
                        done = self.rig.query(
                            "SELECT count(*) FROM turns_turn WHERE text = ANY(%s) "
                            "AND status = 'done'",
                            sent,
                        )
                        if done[0][0] == len(sent):
                            break
                    time.sleep(0.1)
                self._stop.wait(0.1)
        finally:
            browser.close()

    def _sockets(self) -> None:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        cookie = self.browser.cookie_header()
        while not self._stop.is_set():
            session = secrets.choice(self.sessions)
            try:
                with connect(
                    f"{self.rig.ws_url}/ws/sessions/{session}/",
                    additional_headers={"Cookie": cookie, "Origin": self.rig.url},
                    open_timeout=5,
                    close_timeout=1,
                ) as socket:
                    with contextlib.suppress(TimeoutError):
                        socket.recv(timeout=0.5)
                    self.handshakes["opened"] += 1
            except InvalidStatus as error:
                status = error.response.status_code
                self.handshakes[status] += 1
                if status >= 500:
                    self.tally.server_errors += 1
            except Exception as error:  # refused, reset, closed early: not a 5xx
                self.handshakes[type(error).__name__] += 1
            self._stop.wait(0.3)


# -- accounting -------------------------------------------------------------------------------
def account(rig: Rig, tally: Tally) -> dict:
    """lost / duplicated / stuck of the acknowledged messages, from the database."""
    texts = [text for session_texts in tally.acknowledged.values() for text in session_texts]
    sessions = list(tally.acknowledged)
    turns: dict[str, list[str]] = {}
    for text, status, error in rig.query(
        "SELECT text, status, error FROM turns_turn WHERE text = ANY(%s)", texts
    ):
        failure = f" ({error.strip().splitlines()[-1][:120]})" if error.strip() else ""
        turns.setdefault(text, []).append(status + failure)
    rows = rig.query(
        "SELECT session_id, sender, text, tool_calls, tool_results FROM conversations_message "
        "WHERE session_id = ANY(%s) AND framework_context IS NULL AND NOT is_compaction "
        "AND NOT is_skill_injection ORDER BY session_id, seq",
        sessions,
    )
    by_session: dict[str, list[tuple]] = {}
    for session, *row in rows:
        by_session.setdefault(session, []).append(tuple(row))
    stored: Counter = Counter()
    # request text -> final replies before the next request (a compaction summary, stored
    # between a request and its reply, is no request: left out above)
    replies: Counter = Counter()
    for messages in by_session.values():
        current = None
        for sender, text, calls, results in messages:
            if sender == "user" and not results:
                current = text.strip()
                stored[current] += 1
            elif sender == "agent" and not calls and current is not None:
                replies[current] += 1
    lost = duplicated = stuck = 0
    why: Counter = Counter()  # what the stuck and duplicated ones looked like
    odd: dict[str, list[str]] = {}
    for text in texts:
        statuses = turns.get(text, [])
        if not statuses and not stored[text]:
            lost += 1
            continue
        shape = (
            f"turns {'/'.join(sorted(statuses))}, stored {stored[text]}, replies {replies[text]}"
        )
        if len(statuses) > 1 or stored[text] > 1 or replies[text] > 1:
            duplicated += 1
            why[shape] += 1
        if any(not status.startswith("done") for status in statuses) or not replies[text]:
            stuck += 1
            why[shape] += 1
        if why and shape in why:
            odd.setdefault(shape, []).append(text)
    late = sum(1 for text in tally.unacknowledged if text in turns or stored[text])
    if odd:  # the chats of a few odd ones, message by message, for whoever looks into it
        OUT.mkdir(exist_ok=True)
        examples = {}
        for shape, some in odd.items():
            for text in some[:2]:
                session = next(s for s, texts in tally.acknowledged.items() if text in texts)
                examples.setdefault(shape, []).append(
                    {"text": text, "session": session, "messages": by_session.get(session, [])}
                )
        dump = OUT / f"chaos-{tally.label}.json"
        dump.write_text(json.dumps(examples, indent=1, default=str))
    return {
        "lost": lost,
        "duplicated": duplicated,
        "stuck": stuck,
        "stored_unacknowledged": late,
        "shapes": dict(why),
    }


def unanswered(rig: Rig, tally: Tally) -> int:
    texts = [text for session_texts in tally.acknowledged.values() for text in session_texts]
    try:
        rows = rig.query(
            "SELECT count(*) FROM turns_turn WHERE text = ANY(%s) AND status IN "
            "('queued', 'running')",
            texts,
        )
    except psycopg.OperationalError:
        return -1
    return rows[0][0]


def settle(rig: Rig, tally: Tally, since: float) -> float | None:
    """Seconds from `since` until no acknowledged message waits for its turn (None: never,
    within the settle time)."""
    deadline = time.monotonic() + rig.timing.settle
    while time.monotonic() < deadline:
        if unanswered(rig, tally) == 0:
            return round(time.monotonic() - since, 1)
        time.sleep(0.25)
    return None


class Probe:
    """A chat of its own, logged in before the fault: after it, a message at a time until
    one is acknowledged and answered."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.browser = Browser(rig.url, "probe")
        self.session = self.browser.new_session()

    def heal(self, since: float, timeout: float = 180.0) -> tuple[float | None, float | None]:
        """Seconds from `since` until a message was acknowledged, and until one was
        answered (None: not within `timeout`)."""
        deadline = time.monotonic() + timeout
        acknowledged = None
        while time.monotonic() < deadline:
            text = f"show me the menu [probe {uuid.uuid4().hex[:8]}]"
            if post_message(self.browser, self.session, text, timeout=5) != 303:
                time.sleep(0.1)
                continue
            acknowledged = acknowledged or round(time.monotonic() - since, 2)
            answered = time.monotonic() + 30
            while time.monotonic() < answered:
                with contextlib.suppress(psycopg.Error):
                    done = self.rig.query(
                        "SELECT count(*) FROM turns_turn WHERE text = %s AND status = 'done'",
                        text,
                    )
                    if done[0][0]:
                        return acknowledged, round(time.monotonic() - since, 2)
                time.sleep(0.05)
        return acknowledged, None

    def close(self) -> None:
        self.browser.close()


# -- faults -----------------------------------------------------------------------------------
class Fault:
    """One fault: `inject` breaks something and returns once the fault itself is over (the
    server back, the process killed); the load, the heal and the accounting are shared."""

    name = ""
    what = ""

    def inject(self, rig: Rig) -> None:
        raise NotImplementedError

    def run(self, rig: Rig) -> dict:
        load = Load(rig, self.name, rig.timing.chats)
        probe = Probe(rig)
        load.start()
        time.sleep(rig.timing.before)
        say(f"{self.name}: {self.what}")
        self.inject(rig)
        ended = time.monotonic()
        acknowledged, heal = probe.heal(ended)
        probe.close()
        time.sleep(max(0.0, rig.timing.after - (time.monotonic() - ended)))
        load.stop()
        settled = settle(rig, load.tally, ended)
        row = self.row(rig, load.tally, heal, settled)
        row["notes"] = f"a post acknowledged again after {acknowledged} s; " + self.notes(load)
        load.browser.close()
        return row

    def row(self, rig: Rig, tally: Tally, heal: float | None, settled: float | None) -> dict:
        return {
            "measure": self.name,
            "fault": self.what,
            "acknowledged": tally.count,
            **account(rig, tally),
            "5xx": tally.server_errors,
            "heal_s": heal,
            "settled_s": settled,
        }

    def notes(self, load: Load) -> str:
        refused = {str(k): v for k, v in load.tally.statuses.items() if k != 303 and k != "303"}
        sockets = dict(load.handshakes)
        return f"posts refused {refused or 0}; handshakes {sockets}"


class PostgresRestart(Fault):
    name = "postgres_restart"
    what = "pg_ctl restart -m fast (every connection dies)"

    def inject(self, rig: Rig) -> None:
        rig.pg.restart()


class KillTurnWorker(Fault):
    name = "kill_turn_worker"
    what = "SIGKILL of a turn worker (make serve-prod stops whole; the supervisor restarts it)"
    stopped: float | None = None

    def inject(self, rig: Rig) -> None:
        """The kill, then until make serve-prod has stopped everything (the fault's
        consequence): the heal is the restart from there."""
        stack = rig.stack
        make = stack.process  # the supervisor forgets it once it has seen it exit
        os.kill(stack.turn_workers()[0], signal.SIGKILL)
        killed = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            make.wait(timeout=120)
        self.stopped = round(time.monotonic() - killed, 1)

    def run(self, rig: Rig) -> dict:
        row = super().run(rig)
        row["notes"] = f"make serve-prod stopped {self.stopped} s after the kill; " + row["notes"]
        return row


class KillHttpWorker(Fault):
    name = "kill_http_worker"
    what = "SIGKILL of a granian HTTP worker"

    def inject(self, rig: Rig) -> None:
        os.kill(rig.stack.http_workers()[0], signal.SIGKILL)


class RedisKilled(Fault):
    name = "redis_killed"
    what = "Redis SIGKILLed, restarted empty after {0:.0f} s"

    def run(self, rig: Rig) -> dict:
        self.what = self.what.format(rig.timing.redis_down)
        return super().run(rig)

    def inject(self, rig: Rig) -> None:
        rig.redis.kill()
        time.sleep(rig.timing.redis_down)
        rig.redis.start()


class RedisFrozen(Fault):
    name = "redis_frozen"
    what = "Redis SIGSTOPped for {0:.0f} s"

    def run(self, rig: Rig) -> dict:
        self.what = self.what.format(rig.timing.redis_frozen)
        return super().run(rig)

    def inject(self, rig: Rig) -> None:
        rig.redis.freeze()
        time.sleep(rig.timing.redis_frozen)
        rig.redis.thaw()


BAD_FRAMES = [b"\xff\xfe not UTF-8", b"not json", b"", b"[1, 2]", b'{"kind": "direct"}']


class BadMeshFrames(Fault):
    name = "bad_mesh_frames"
    what = "non-UTF-8, non-JSON and wrongly shaped frames on the mesh's Redis channels"

    def inject(self, rig: Rig) -> None:
        import redis

        client = redis.Redis.from_url(rig.redis.url(1))
        self.sent: list[str] = []
        try:
            for channel in ("mesh:broadcast", f"mesh:agent:{MESH_PEER}"):
                for frame in BAD_FRAMES:
                    client.publish(channel, frame)
            # Good frames among more bad ones; a good frame counts as acknowledged when
            # Redis handed it to a subscriber (a reader that died would have none).
            for number in range(rig.timing.mesh_frames):
                message_id = f"msg_chaos_{uuid.uuid4().hex}"
                frame = {
                    "id": message_id,
                    "from": "chaos",
                    "to": MESH_PEER,
                    "content": f"chaos mesh message {number}",
                }
                if client.publish(f"mesh:agent:{MESH_PEER}", json.dumps(frame)):
                    self.sent.append(message_id)
                for frame in BAD_FRAMES:
                    client.publish(f"mesh:agent:{MESH_PEER}", frame)
                time.sleep(0.2)
        finally:
            client.close()

    def row(self, rig: Rig, tally: Tally, heal: float | None, settled: float | None) -> dict:
        row = super().row(rig, tally, heal, settled)
        deadline = time.monotonic() + 30
        while True:
            found = Counter()
            # The peer's inbox item names the message id ("[message id: msg_...]").
            for (request,) in rig.query("SELECT request FROM inbox_inboxitem"):
                for message_id in self.sent:
                    if message_id in (request or ""):
                        found[message_id] += 1
            if all(found[c] for c in self.sent) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        delivered = sum(1 for c in self.sent if found[c])
        row["mesh"] = f"{delivered} of {len(self.sent)} good frames delivered"
        row["acknowledged"] += len(self.sent)
        row["lost"] += len(self.sent) - delivered
        row["duplicated"] += sum(1 for c in self.sent if found[c] > 1)
        return row


class QueueBurst(Fault):
    name = "queue_bound_burst"
    what = f"{BURST} concurrent posts to one chat (its turns paused), queue bound {QUEUE_BOUND}"

    def inject(self, rig: Rig) -> None:
        pass

    def run(self, rig: Rig) -> dict:
        say(f"{self.name}: {rig.timing.bursts} bursts of {BURST} concurrent posts")
        browser = Browser(rig.url, "burst")
        tally = Tally(self.name)
        over = most = 0
        started = time.monotonic()
        with ThreadPoolExecutor(BURST) as pool:
            for burst in range(rig.timing.bursts):
                session = browser.new_session()
                texts = [
                    f"show me the menu [burst {burst} {i} {session[-6:]}]" for i in range(BURST)
                ]
                # The turn workers paused (SIGSTOP) while the burst lands: no turn starts,
                # so every accepted post is still waiting, and the bound is exact.
                workers = rig.stack.turn_workers()
                for pid in workers:
                    os.kill(pid, signal.SIGSTOP)
                try:
                    outcomes = list(
                        pool.map(post_message, [browser] * BURST, [session] * BURST, texts)
                    )
                finally:
                    for pid in workers:
                        os.kill(pid, signal.SIGCONT)
                for text, outcome in zip(texts, outcomes, strict=True):
                    tally.record(session, text, outcome)
                accepted = sum(1 for outcome in outcomes if outcome == 303)
                most = max(most, accepted)
                over += accepted > QUEUE_BOUND
        settled = settle(rig, tally, started)
        row = self.row(rig, tally, None, settled)
        row["notes"] = (
            f"bursts that accepted more than the bound: {over} of {rig.timing.bursts} "
            f"(most accepted in one burst: {most}); "
            f"posts {dict((str(k), v) for k, v in tally.statuses.items())}"
        )
        row["duplicated"] += over
        browser.close()
        return row


class RetriedPosts(Fault):
    name = "retried_posts"
    what = "posts retried with the same Idempotency-Key (the first timed out on the client)"

    def inject(self, rig: Rig) -> None:
        pass

    def run(self, rig: Rig) -> dict:
        say(f"{self.name}: {self.what}")
        browser = Browser(rig.url, "chaos")
        tally = Tally(self.name)
        started = time.monotonic()
        for number in range(rig.timing.retries):
            session = browser.new_session()
            text = f"show me the menu [retry {number} {session[-6:]}]"
            key = str(uuid.uuid4())
            # The first try gives up before the answer; the retry carries the same key.
            post_message(browser, session, text, headers={"Idempotency-Key": key}, timeout=0.02)
            outcome = post_message(browser, session, text, headers={"Idempotency-Key": key})
            tally.record(session, text, outcome)
        settled = settle(rig, tally, started)
        row = self.row(rig, tally, None, settled)
        row["notes"] = f"retries {dict((str(k), v) for k, v in tally.statuses.items())}"
        browser.close()
        return row


FAULTS: list[type[Fault]] = [
    PostgresRestart,
    KillTurnWorker,
    KillHttpWorker,
    RedisKilled,
    RedisFrozen,
    BadMeshFrames,
    QueueBurst,
    RetriedPosts,
]


# -- the report -------------------------------------------------------------------------------
COLUMNS = ["measure", "acknowledged", "lost", "duplicated", "stuck", "5xx", "heal_s", "settled_s"]


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " | notes |", "|" + " --- |" * (len(COLUMNS) + 1)]
    for row in rows:
        cells = ["-" if row.get(c) is None else str(row.get(c)) for c in COLUMNS]
        late = row.get("stored_unacknowledged")
        notes = "; ".join(
            [str(row[k]) for k in ("error", "restarted", "mesh", "shapes", "notes") if row.get(k)]
            + ([f"stored though not acknowledged (client gave up): {late}"] if late else [])
        )
        lines.append("| " + " | ".join(cells) + f" | {notes} |")
    return "\n".join(lines)


def write_results(document: dict, seconds: float, path: Path) -> None:
    """This script's rows into bench/results.json (others' kept) and results.md."""
    from bench import run_all

    script = ROOT / "bench" / "chaos.py"
    results = json.loads(path.read_text()) if path.exists() else []
    results = [r for r in results if r.get("script") != "bench/chaos.py"]
    results += run_all.results_of(script, document, seconds, None)
    path.write_text(json.dumps(results, indent=2) + "\n")
    if path == run_all.RESULTS_JSON:
        markdown = run_all.markdown(results)
        run_all.RESULTS_MD.write_text(markdown)
        run_all.splice_readme(markdown)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=bool(os.environ.get("CHAOS_QUICK")))
    parser.add_argument("--faults", default=os.environ.get("CHAOS_FAULTS", ""))
    parser.add_argument(
        "--results", default=os.environ.get("CHAOS_RESULTS", str(ROOT / "bench" / "results.json"))
    )
    args = parser.parse_args()
    if pg_bindir() is None:  # Debian's server programs are off the PATH
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if found:
            os.environ["PG_BINDIR"] = str(found[-1].parent)
    chosen = [f for f in FAULTS if not args.faults or f.name in args.faults.split(",")]
    if not chosen:
        raise SystemExit(f"no such fault; known: {', '.join(f.name for f in FAULTS)}")
    timing = Timing.quick() if args.quick else Timing()
    started = time.monotonic()
    rig = Rig(timing)
    rows: list[dict] = []
    try:
        rig.start()
        for fault in chosen:
            rig.wait_up()
            time.sleep(6.5)  # granian: a worker dead within 5.5 s of its respawn is a crash loop
            before = Counter(rig.restarts)
            try:
                row = fault().run(rig)
            except Exception as error:  # a fault the rig could not run is a row too
                row = {"measure": fault.name, "error": f"{type(error).__name__}: {error}"}
            restarted = rig.restarts - before
            if restarted:  # by the supervisor, as systemd would
                row["restarted"] = "restarted by the supervisor: " + ", ".join(
                    f"{name} x{count}" for name, count in restarted.items()
                )
            rows.append(row)
            say(table([row]).splitlines()[-1])
    finally:
        rig.stop()
    seconds = round(time.monotonic() - started, 1)
    clean = all(
        not row.get("error") and not row["lost"] and not row["duplicated"] and not row["stuck"]
        for row in rows
    )
    lost = sum(row.get("lost") or 0 for row in rows)
    duplicated = sum(row.get("duplicated") or 0 for row in rows)
    stuck = sum(row.get("stuck") or 0 for row in rows)
    document = {
        "machine": machine(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "configuration": {
            "quick": args.quick,
            "topology": "make serve-prod: granian 2 workers, uvicorn 2 workers, 2 turn workers; "
            "PostgreSQL and Redis of its own; run_agent on the Redis mesh; offline demo model",
            "queue_bound": QUEUE_BOUND,
            "lease_s": LEASE_SECONDS,
            "restarts": dict(rig.restarts),
        },
        "measures": rows,
        "goals": [
            goal(
                21,
                "make chaos: 0 lost, 0 duplicated, 0 stuck over every fault",
                f"{lost} lost, {duplicated} duplicated, {stuck} stuck over {len(rows)} faults",
                clean,
            )
        ],
    }
    print(table(rows))
    write_results(document, seconds, Path(args.results))
    print(f"wrote {args.results}" + ("" if clean else "; not clean: see lost / duplicated / stuck"))
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
