"""`make serve-prod`: the production topology as one unit, up together or not at all.

Starts the HTTP server (granian, WSGI workers it respawns when one crashes), the websocket
and /mcp/ server (uvicorn, whose master restarts a dead worker when it runs two or more) and
the turn workers, then waits on all of them. A worker that crashes inside granian or
uvicorn is replaced by its own master; when one of the processes started here exits for
good (a master, or a turn worker), every other one is stopped (SIGTERM, then SIGKILL after
GRACE_SECONDS, with anything they left behind) and this launcher exits non-zero, so the
supervisor running it (systemd, a container runtime) restarts the whole stack instead of
leaving it half up. SIGTERM or SIGINT stops everything and exits 0.

Configured by the environment (the Makefile passes its variables): HOST, PORT, WS_PORT,
HTTP_WORKERS, HTTP_THREADS, WS_WORKERS, TURN_WORKERS, and PROXY_PORT: when set, nginx
(Debian's `nginx` package) runs beside them on that port and routes as the production proxy
does (`/ws/`, `/mcp/` and the SSE streams `/api/sessions/<id>/events` to WS_PORT, the
rest to PORT), so the whole topology can be tried in
a browser at one address. Every process writes its Prometheus metrics to one folder
(PROMETHEUS_MULTIPROC_DIR, emptied at start; a temporary one when unset), so `/metrics` on any
server process adds up all of them. Standard library only; Linux (it becomes the child
subreaper, so a master's orphaned workers are stopped too).

    HOST=127.0.0.1 PORT=8000 WS_PORT=8001 .venv/bin/python .ci/serve_prod.py
    PROXY_PORT=8080 .venv/bin/python .ci/serve_prod.py     # then http://127.0.0.1:8080/
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GRACE_SECONDS = 20.0
POLL_SECONDS = 0.2
PR_SET_CHILD_SUBREAPER = 36
FORGET_DEAD_SECONDS = 5.0


def setting(name: str, default: str) -> str:
    return os.environ.get(name) or default


def processes() -> list[tuple[str, list[str], dict[str, str]]]:
    """(name, command, extra environment) of every process of the topology."""
    host = setting("HOST", "127.0.0.1")
    http = [
        str(BIN / "granian"),
        "--interface",
        "wsgi",
        "gloveapp.wsgi:application",
        "--host",
        host,
        "--port",
        setting("PORT", "8000"),
        "--workers",
        setting("HTTP_WORKERS", "2"),
        "--blocking-threads",
        setting("HTTP_THREADS", "6"),
        "--no-ws",
        "--log-level",
        "warning",
        # A worker that dies is replaced (granian's master exits otherwise), one second
        # later; a worker that does not stop within 10 s of a shutdown is killed.
        "--respawn-failed-workers",
        "--respawn-interval",
        "1",
        "--workers-kill-timeout",
        "10",
    ]
    websockets = [
        str(BIN / "uvicorn"),
        "gloveapp.asgi:application",
        "--host",
        host,
        "--port",
        setting("WS_PORT", "8001"),
        # Two or more: uvicorn's master then restarts a worker that dies (with one it runs
        # the server in its own process, and a crash ends it).
        "--workers",
        setting("WS_WORKERS", "2"),
        "--ws",
        "websockets-sansio",
        "--lifespan",
        "off",
        "--no-access-log",
        "--timeout-graceful-shutdown",
        "10",
    ]
    found = [
        ("http (granian)", http, {}),
        ("websockets (uvicorn)", websockets, {"GLOVE_SERVER": "asgi"}),
    ]
    if proxy_port := os.environ.get("PROXY_PORT"):
        found.append(("proxy (nginx)", nginx_command(host, proxy_port), {}))
    turn = [sys.executable, "manage.py", "turn_worker"]
    count = int(setting("TURN_WORKERS", "1"))
    for number in range(1, count + 1):
        found.append((f"turn worker {number}" if count > 1 else "turn worker", turn, {}))
    return found


# The production proxy's routing (docs/howto/deploy.md), for trying the topology locally.
# `$http_host` keeps the port, so Django's CSRF check sees the address the browser used.
NGINX_CONF = """
worker_processes 1;
pid {prefix}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    client_max_body_size 16m;
    server {{
        listen {host}:{port};
        location /ws/ {{
            proxy_pass http://127.0.0.1:{ws_port};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_set_header Host $http_host;
            proxy_read_timeout 1h;
        }}
        location ~ ^/api/sessions/[^/]+/events$ {{
            proxy_pass http://127.0.0.1:{ws_port};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
        location /mcp/ {{
            proxy_pass http://127.0.0.1:{ws_port};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_buffering off;
        }}
        # The A2A server (its streams are SSE) and the default agent's card: ASGI only.
        location /a2a/ {{
            proxy_pass http://127.0.0.1:{ws_port};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
        location = /.well-known/agent-card.json {{
            proxy_pass http://127.0.0.1:{ws_port};
            proxy_set_header Host $http_host;
        }}
        location / {{
            proxy_pass http://127.0.0.1:{http_port};
            proxy_set_header Host $http_host;
        }}
    }}
}}
"""


# Folders of ours to remove once everything has stopped.
LEFT_BEHIND: list[Path] = []


def nginx_command(host: str, port: str) -> list[str]:
    """nginx in the foreground on `port`, its configuration and files in a folder of its own."""
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if nginx is None:
        say("PROXY_PORT needs nginx: apt-get install nginx (Debian's package)")
        sys.exit(2)
    prefix = Path(tempfile.mkdtemp(prefix="glove-proxy-"))
    prefix.chmod(0o755)
    LEFT_BEHIND.append(prefix)
    conf = NGINX_CONF.format(
        prefix=prefix,
        host=host,
        port=port,
        ws_port=setting("WS_PORT", "8001"),
        http_port=setting("PORT", "8000"),
    )
    (prefix / "nginx.conf").write_text(conf)
    return [nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"]


def say(text: str) -> None:
    print(f"serve-prod: {text}", file=sys.stderr, flush=True)


def become_subreaper() -> None:
    """Orphans of our children (a killed master's workers) become ours, so they are found
    and stopped with the rest instead of serving on unsupervised."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def children() -> list[int]:
    """Pids of this process's living children (started here, or orphans adopted)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def reap() -> dict[int, int]:
    """Collect every exited child; pid -> exit code (negative: killed by that signal)."""
    exited = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return exited
        if pid == 0:
            return exited
        exited[pid] = os.waitstatus_to_exitcode(status)


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def stop_everything(running: dict[int, str]) -> None:
    """SIGTERM to what is left of ours, SIGKILL after the grace period; until no child
    (started here or adopted) remains."""
    signal_all(list(running), signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while True:
        for pid in reap():
            running.pop(pid, None)
        left = children()
        if not left:
            return
        if time.monotonic() > deadline:
            say(f"still running after {GRACE_SECONDS:.0f} s, killing: {sorted(left)}")
            signal_all(left, signal.SIGKILL)
            deadline = time.monotonic() + GRACE_SECONDS
        time.sleep(POLL_SECONDS)


def metrics_folder() -> tuple[Path, bool]:
    """The folder every process writes its Prometheus metrics to (PROMETHEUS_MULTIPROC_DIR,
    else a new temporary one, removed at the end), emptied: counts start at zero with the
    stack, never carried over from a previous run's processes. Returns (folder, ours)."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if not given:
        return Path(tempfile.mkdtemp(prefix="glove-metrics-")), True
    folder = Path(given)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink(missing_ok=True)
    return folder, False


def forget_dead_gauges(folder: Path) -> None:
    """A dead process's live gauges (open websockets) must stop counting: remove its
    `gauge_live*_<pid>.db` files, as the client's `mark_process_dead` does (a respawned
    server worker is a new pid; the dead one's counters and histograms are kept)."""
    for path in folder.glob("gauge_live*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            path.unlink(missing_ok=True)


def main() -> int:
    become_subreaper()
    metrics, metrics_ours = metrics_folder()
    asked: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: asked.append(signum))

    running: dict[int, str] = {}
    for name, command, extra in processes():
        environment = {
            **os.environ,
            "DB_CONN_MAX_AGE": "0",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
            **extra,
        }
        process = subprocess.Popen(command, cwd=ROOT, env=environment)
        process.returncode = 0  # reaped below by waitpid, never by Popen
        running[process.pid] = name
        say(f"started {name} (pid {process.pid}): {' '.join(command)}")

    ended: tuple[str, int] | None = None
    next_forget = time.monotonic() + FORGET_DEAD_SECONDS
    while not asked and ended is None:
        for pid, code in reap().items():
            if pid in running:
                ended = (running.pop(pid), code)
        if time.monotonic() > next_forget:
            next_forget = time.monotonic() + FORGET_DEAD_SECONDS
            with contextlib.suppress(OSError):
                forget_dead_gauges(metrics)
        time.sleep(POLL_SECONDS)

    if ended is not None:
        name, code = ended
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        say(f"{name} {how}; stopping everything (exit 1, for the supervisor to restart)")
    else:
        say(f"{signal.Signals(asked[0]).name} received; stopping everything")
    stop_everything(running)
    if metrics_ours:
        shutil.rmtree(metrics, ignore_errors=True)
    for folder in LEFT_BEHIND:
        shutil.rmtree(folder, ignore_errors=True)
    if ended is None:
        say("stopped")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
