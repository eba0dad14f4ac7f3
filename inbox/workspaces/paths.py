"""Where a doc path may point: inside the workspace root, after resolving symlinks.

Django-free. The same rules run when an agent pushes a doc and every time a file is read for
the inbox page, because the folder can change in between (a file replaced by a symlink).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from gloveapp.core.input_rules import unstorable_text_problem

MAX_PATH_CHARS = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


class PathRefused(ValueError):
    """The path is malformed or points outside the workspace ("invalid_path")."""


class FileMissing(LookupError):
    """Nothing readable at this path (missing, moved, a directory, ...)."""


class RootReplaced(PathRefused):
    """The workspace's root is no longer the folder it was created with."""

    def __init__(self) -> None:
        super().__init__(
            "the workspace folder was replaced since the workspace was made; nothing is read "
            "from it"
        )


def folder_identity(folder: str) -> tuple[int, int]:
    """(device, inode) of a folder, recorded when a workspace is made."""
    info = os.stat(folder)
    return (_signed64(info.st_dev), _signed64(info.st_ino))


def _signed64(value: int) -> int:
    # Stored in a signed 64-bit column; device and inode numbers are unsigned.
    return value - (1 << 64) if value >= 1 << 63 else value


def check_root(root: str, identity: tuple[int, int] | None) -> None:
    """Raise `RootReplaced` unless `root` is still the folder `identity` names (and not a
    symlink: the stored root had its symlinks resolved when it was recorded)."""
    if identity is None:
        return
    try:
        info = os.lstat(root)
    except OSError:
        raise FileMissing(root) from None
    found = (_signed64(info.st_dev), _signed64(info.st_ino))
    if not stat.S_ISDIR(info.st_mode) or found != tuple(identity):
        raise RootReplaced


@dataclass(frozen=True)
class OpenedFile:
    fd: int
    size: int
    real_path: str
    # The file's version, for caching what was made of it.
    mtime_ns: int = 0
    inode: int = 0


def check_relative(rel: object) -> str:
    """The path's own shape: a non-empty relative POSIX path, no tricks. Returns it."""
    if not isinstance(rel, str) or not rel:
        raise PathRefused("must be a non-empty string")
    if len(rel) > MAX_PATH_CHARS:
        raise PathRefused(f"must be at most {MAX_PATH_CHARS} characters")
    # A file name that is not UTF-8 arrives as lone surrogates (surrogateescape): the OS
    # would open it, but no page, database or MCP answer can carry it. Not echoed either.
    problem = unstorable_text_problem(rel)
    if problem:
        raise PathRefused(f"must not contain {problem} (file names must be UTF-8)")
    if _CONTROL.search(rel):
        raise PathRefused("must not contain NUL or control characters")
    if rel.startswith(("/", "\\", "~")) or _WINDOWS_DRIVE.match(rel):
        raise PathRefused(f"must be relative to the workspace root: {rel}")
    if "\\" in rel:
        raise PathRefused(f"must use forward slashes: {rel}")
    # An agent that URL-encodes a path means some other path than the file it names; refuse
    # rather than guess (and `%2e%2e/` must never become `../` somewhere further down).
    if unquote(rel) != rel:
        raise PathRefused(f"must not be URL-encoded: {rel}")
    normal = os.path.normpath(rel)
    if normal == ".." or normal.startswith("../") or os.path.isabs(normal):
        raise PathRefused(f"refused to escape workspace: {rel}")
    # One name per file: `note.txt/`, `./note.txt`, `a/../note.txt` and `a//note.txt` all
    # open the same file as `note.txt` (or fail oddly), so they are refused.
    if rel.endswith("/"):
        raise PathRefused(f"must name a file, not end with a slash: {rel}")
    if any(segment in ("", ".", "..") for segment in rel.split("/")):
        raise PathRefused(f"must not contain empty, '.' or '..' segments: {rel}")
    return rel


def _inside(root: str, candidate: str) -> bool:
    return candidate == root or candidate.startswith(root.rstrip(os.sep) + os.sep)


def resolve_inside(root: str, rel: object) -> str:
    """The real path `rel` names under `root`, or PathRefused if it leads outside."""
    rel = check_relative(rel)
    real_root = os.path.realpath(root)
    candidate = os.path.realpath(os.path.join(real_root, rel))
    if not _inside(real_root, candidate):
        raise PathRefused(f"refused to escape workspace: {rel}")
    return candidate


def open_inside(root: str, rel: object, *, identity: tuple[int, int] | None = None) -> OpenedFile:
    """Open a regular file inside the root for reading; the caller closes `fd`.

    Resolving then opening leaves a window in which a component could be swapped for a
    symlink, so the opened descriptor itself is checked again: O_NOFOLLOW refuses a symlink
    as the last component, and /proc/self/fd tells where the open file really is. With the
    root's `identity` (`folder_identity` at creation), a root swapped since is refused, before
    and again after the open.
    """
    check_root(root, identity)
    real = resolve_inside(root, rel)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError as exc:
        raise FileMissing(str(rel)) from exc
    except OSError as exc:  # ELOOP (a symlink swapped in), EACCES, ENOTDIR, ...
        raise FileMissing(str(rel)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileMissing(str(rel))
        proc = Path(f"/proc/self/fd/{fd}")
        if proc.exists():
            opened = os.path.realpath(os.readlink(proc))
            if not _inside(os.path.realpath(root), opened):
                raise PathRefused(f"refused to escape workspace: {rel}")
        check_root(root, identity)
        return OpenedFile(
            fd=fd, size=info.st_size, real_path=real, mtime_ns=info.st_mtime_ns, inode=info.st_ino
        )
    except BaseException:
        os.close(fd)
        raise


def check_existing_file(root: str, rel: object, *, identity: tuple[int, int] | None = None) -> None:
    """Push-time check: the path is inside the root and names a readable regular file."""
    opened = open_inside(root, rel, identity=identity)
    os.close(opened.fd)
