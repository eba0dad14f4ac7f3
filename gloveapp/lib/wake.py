"""Wake-ups between the processes of one machine, for the embedded database (SQLite).

PostgreSQL tells a waiting process that something changed (LISTEN/NOTIFY); SQLite has no
such thing, so the turn worker and the mesh peer of `make run` used to ask the database
every 20-50 ms, and an idle `make run` burned a sixth of a core doing it. Instead, each
process that waits binds a Unix datagram socket in a folder beside the database file
(`<database>.wake/<channel>.<pid>.<n>.sock`), and a process that stores something worth
waking for sends a byte to every socket of the channel after its transaction commits
(`wake_after_commit`). A waiting process sleeps until a datagram comes, or until its own
safety-net recheck (a second or so) passes, in case one was lost.

Only where every process shares one file system and one database file: SQLite. Elsewhere
(`wake_folder()` is None) nothing is bound or sent, and the callers keep their NOTIFY or
their poll. A send never blocks and never fails its caller: a full buffer means the
receiver is awake already; a socket nobody holds (its process died) is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

from django.db import connections, transaction

logger = logging.getLogger(__name__)

TURNS = "turns"
MESH = "mesh"
# sun_path is 108 bytes on Linux (104 on macOS): a longer path cannot be bound.
MAX_SOCKET_PATH = 100
_counter = itertools.count()


def wake_folder(alias: str = "default") -> Path | None:
    """Where the wake-up sockets of this database live, or None (not a SQLite file)."""
    connection = connections[alias]
    if connection.vendor != "sqlite":
        return None
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or "mode=memory" in name or name.startswith("file:"):
        return None
    return Path(name).resolve().with_name(Path(name).name + ".wake")


def wake(channel: str, payload: str = "", *, alias: str = "default") -> int:
    """Send `payload` to every process waiting on `channel`; returns how many got it."""
    folder = wake_folder(alias)
    if folder is None or not folder.is_dir():
        return 0
    sent = 0
    data = payload.encode() or b"."
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for path in folder.glob(f"{channel}.*.sock"):
            try:
                sender.sendto(data, str(path))
                sent += 1
            except BlockingIOError:
                sent += 1  # its queue is full: it has wake-ups to read already
            except (ConnectionRefusedError, FileNotFoundError):
                # Nobody holds it any more (its process died without removing it).
                with contextlib.suppress(OSError):
                    path.unlink()
            except OSError:
                logger.debug("could not wake %s", path, exc_info=True)
    return sent


def wake_after_commit(channel: str, payload: str = "", *, alias: str = "default") -> None:
    """`wake` once the current transaction commits (at once outside one); nothing if it
    rolls back. A no-op where there is no wake folder (PostgreSQL uses NOTIFY)."""
    if wake_folder(alias) is None:
        return
    transaction.on_commit(lambda: wake(channel, payload, alias=alias), using=alias)


class WakeListener:
    """The waiting end of a channel, on an asyncio loop: `on_wake(payload)` for each
    datagram, called on the loop. `start()` is False where wake-ups do not apply."""

    def __init__(self, channel: str, on_wake: Callable[[str], None]) -> None:
        self.channel = channel
        self.on_wake = on_wake
        self.path: Path | None = None
        self._socket: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, alias: str = "default") -> bool:
        folder = wake_folder(alias)
        if folder is None:
            return False
        path = folder / f"{self.channel}.{os.getpid()}.{next(_counter)}.sock"
        if len(str(path)) > MAX_SOCKET_PATH:
            logger.info("wake-ups off: %s is too long a socket path; polling instead", path)
            return False
        try:
            folder.mkdir(exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            receiver.setblocking(False)
            receiver.bind(str(path))
        except OSError:
            logger.info("wake-ups off (cannot bind %s); polling instead", path, exc_info=True)
            return False
        self._socket, self.path = receiver, path
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(receiver.fileno(), self._read)
        return True

    def _read(self) -> None:
        assert self._socket is not None
        while True:
            try:
                data = self._socket.recv(256)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self.on_wake(data.decode(errors="replace").strip("."))

    def close(self) -> None:
        if self._socket is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._socket.fileno())
        self._socket.close()
        self._socket = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
