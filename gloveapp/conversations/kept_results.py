"""Whole tool results past the cap, kept for a download (`core.results` cuts them).

The conversation stores and the model reads at most GLOVE_TOOL_RESULT_MAX_BYTES of a
result; the whole (up to GLOVE_TOOL_RESULT_KEEP_MAX_BYTES) is kept here, gzip-compressed,
one row per call, deleted with its session. Who may download it is who may see the
session (its owner, staff): the page's route asks `access.viewable_session`.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

from django.conf import settings

from gloveapp.conversations.models import KeptToolResult
from gloveapp.core import input_rules

CHUNK = 64 * 1024


def tool_result_keep(*, session_id: str, call_id: str, tool_name: str, whole: str) -> bool:
    """Keep the whole result of a cut call; False when it is larger than the keep cap (then
    only its head, in the conversation, remains). A second keep of one call is a no-op."""
    input_rules.check_text(call_id, "call_id", allow_empty=False, max_length=200)
    encoded = whole.encode("utf-8")
    if len(encoded) > settings.GLOVE_TOOL_RESULT_KEEP_MAX_BYTES:
        return False
    KeptToolResult.objects.bulk_create(
        [
            KeptToolResult(
                session_id=session_id,
                call_id=call_id,
                tool_name=tool_name[:200],
                size=len(encoded),
                content=gzip.compress(encoded, compresslevel=6),
            )
        ],
        ignore_conflicts=True,  # a retried turn keeping the same call again
    )
    return True


def kept_tool_result(*, session_id: str, call_id: str) -> KeptToolResult | None:
    if not input_rules.could_name_a_row(call_id, max_length=200):
        return None
    return KeptToolResult.objects.filter(session_id=session_id, call_id=call_id).first()


def kept_chunks(row: KeptToolResult) -> Iterator[bytes]:
    """The whole result's UTF-8 JSON, decompressed a chunk at a time (never all at once)."""
    inflate = zlib.decompressobj(wbits=31)  # gzip framing
    pending = bytes(row.content)
    while pending:
        piece = inflate.decompress(pending, CHUNK)
        pending = inflate.unconsumed_tail
        if piece:
            yield piece
        elif not pending:
            break
    tail = inflate.flush()
    if tail:
        yield tail
