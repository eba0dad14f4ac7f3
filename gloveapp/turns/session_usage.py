"""The session's token usage per model, which the turns that used them add to (a
session's cost reads those rows, not its turns)."""

from __future__ import annotations

from gloveapp.lib.db.prepared import prepared_cursor
from gloveapp.observe.cost import Usage
from gloveapp.turns.models import SessionUsage, Turn

_USAGE = SessionUsage._meta.db_table
# The session's usage per model gains the finished turn's (once: the UPDATE above is fenced).
_USAGE_SQL = f"""
    INSERT INTO {_USAGE} (session_id, model, tokens_in, tokens_out, cache_read_tokens,
                          cache_write_tokens)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (session_id, model) DO UPDATE SET
        tokens_in = {_USAGE}.tokens_in + excluded.tokens_in,
        tokens_out = {_USAGE}.tokens_out + excluded.tokens_out,
        cache_read_tokens = {_USAGE}.cache_read_tokens + excluded.cache_read_tokens,
        cache_write_tokens = {_USAGE}.cache_write_tokens + excluded.cache_write_tokens
"""


def add_session_usage(session_id: str, model: str, usage: Usage) -> None:
    """Add an attempt's tokens to the session's row for its model (the session's cost reads
    those rows, not its turns), in the caller's transaction."""
    if not (usage.tokens_in or usage.tokens_out or usage.cache_read or usage.cache_write):
        return
    with prepared_cursor() as cursor:
        cursor.execute(
            _USAGE_SQL,
            [
                session_id,
                model[: Turn._meta.get_field("model").max_length],
                usage.tokens_in,
                usage.tokens_out,
                usage.cache_read,
                usage.cache_write,
            ],
        )
