"""Keyset pages: what every list that can grow reads one screen of, whatever the table's size.

A page is read by its ordering key, never by OFFSET (an offset still reads every row it
skips). A list of rows goes newest first and carries an opaque `cursor`: the ordering key of
the last row shown plus a tie-breaker, so the next page starts right after it with one index
probe. A history of messages pages by `seq` instead (`before` / `after`).

A cursor is signed (`django.core.signing`, salted with the name of the list that handed it
out): its tie goes into a query as it is, and a made-up one (a NUL byte, a lone surrogate, a
non-UUID tie for a UUID key) would reach the database, or another list's cursor the wrong
column. Only a cursor this list signed parses; anything else is a `PageParamError`.

Plain values in, plain values out: the domain apps' selectors build their keyset filters
from `Cursor`, and the edges (REST, pages) parse what clients send with `parse_limit` /
`parse_cursor` / `parse_seq`, whose `PageParamError` names the parameter.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core import signing


class PageParamError(ValueError):
    """A paging parameter a client sent is not valid: `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a newest-first page of rows resumes: the last row's ordering time and its
    tie-breaker (an id or a key). Opaque to clients (`encode`)."""

    at: datetime
    tie: str | int

    def encode(self, listed: str) -> str:
        """The cursor as the list named `listed` hands it out, signed for that list only."""
        raw = json.dumps([self.at.isoformat(), self.tie], separators=(",", ":"))
        text = base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")
        return _signer(listed).sign(text)


def _signer(listed: str) -> signing.Signer:
    # "." is URL-safe and outside both the base64url and the signature alphabets.
    return signing.Signer(sep=".", salt=f"gloveapp.lib.paging.cursor:{listed}")


def parse_limit(raw: Any, *, default: int, maximum: int, field: str = "limit") -> int:
    """`limit` as sent (None or "" for the default), between 1 and `maximum`."""
    if raw is None or raw == "":
        return default
    text = str(raw)
    if not (text.isascii() and text.isdigit() and len(text) < 10):
        raise PageParamError(field, f"{field}: must be a whole number from 1 to {maximum}.")
    value = int(text)
    if not 1 <= value <= maximum:
        raise PageParamError(field, f"{field}: must be a whole number from 1 to {maximum}.")
    return value


def parse_seq(raw: Any, *, field: str) -> int | None:
    """A message sequence number as sent (`before`, `after`), None when absent."""
    if raw is None or raw == "":
        return None
    text = str(raw)
    if not (text.isascii() and text.isdigit() and len(text) < 10):
        raise PageParamError(field, f"{field}: must be a message sequence number (0 or more).")
    return int(text)


def parse_cursor(raw: Any, *, listed: str, tie: type = str, field: str = "cursor") -> Cursor | None:
    """A cursor the list named `listed` handed out (`Cursor.encode(listed)`), None when
    absent. Its signature is checked before anything in it is read; what it holds is then
    checked all the same (a tie the database can store), so a key rotation's fallback or a
    bug elsewhere can never hand the query a value it would fail on."""
    if raw is None or raw == "":
        return None
    problem = PageParamError(field, f"{field}: not a cursor this list handed out.")
    text = raw if isinstance(raw, str) else ""
    if not text or len(text) > 1000 or not text.isascii():
        raise problem
    try:
        text = _signer(listed).unsign(text)
        decoded = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        at, key = decoded
        moment = datetime.fromisoformat(at)
    except (
        signing.BadSignature,
        ValueError,
        TypeError,
        binascii.Error,
        UnicodeDecodeError,
        RecursionError,
    ):
        raise problem from None
    if moment.tzinfo is None or not isinstance(key, tie) or isinstance(key, bool):
        raise problem
    if isinstance(key, str) and not _storable(key):
        raise problem
    return Cursor(at=moment, tie=key)


def _storable(text: str) -> bool:
    """Text every database takes: no NUL byte, no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
