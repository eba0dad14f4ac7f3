"""The store a turn's agent loop writes through: each model reply's tokens are counted once,
in the reply's own transaction, everywhere they are read.

A reply (and a compaction's tokens) went to the session's counters as it was stored, but to
the turn's tokens and the session's usage by model (what cost is priced from) only when the
attempt ended: an attempt whose worker died had its replies stored and their tokens in the
session's counters, on no turn and under no model, so the REST cost said "(model not
recorded)" and the pages, the REST cost and `/metrics` told three totals. Here the same
transaction stores the reply, adds its tokens to the session's counters, to the turn and to
the session's usage of the model, fenced as every write of the attempt (a worker that lost
the turn stores nothing); `/metrics` counts them once that transaction has committed.
What an attempt's model calls used beyond what it stored (a compaction's input tokens, which
Glove's counters leave out) is added when the attempt ends, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.db import transaction

from gloveapp.conversations.append import Fence, FencedOff, fence_holds
from gloveapp.conversations.locks import session_lock
from gloveapp.conversations.services import tokens_add, turn_record
from gloveapp.core.types import Message as CoreMessage
from gloveapp.core.types import TokenUsage
from gloveapp.lib.db.outages import healing
from gloveapp.lib.db.prepared import prepared_cursor
from gloveapp.observe.cost import Usage
from gloveapp.ormstore.store import DjangoStore
from gloveapp.turns.fence import turn_fence
from gloveapp.turns.models import Turn
from gloveapp.turns.session_usage import add_session_usage

_TURN_USAGE_SQL = f"""
    UPDATE {Turn._meta.db_table}
       SET tokens_in = tokens_in + %s, tokens_out = tokens_out + %s,
           cache_read_tokens = cache_read_tokens + %s,
           cache_write_tokens = cache_write_tokens + %s,
           model = CASE WHEN %s = '' THEN model ELSE %s END
     WHERE id = %s
"""


def usage_of(usage: TokenUsage) -> Usage:
    return Usage(
        tokens_in=usage.tokens_in or 0,
        tokens_out=usage.tokens_out or 0,
        cache_read=usage.cache_read_input_tokens or 0,
        cache_write=usage.cache_creation_input_tokens or 0,
    )


def turn_usage_record(
    *,
    turn: Turn,
    model: str,
    usage: TokenUsage,
    messages: list[CoreMessage] | None = None,
    fence: Fence | None = None,
) -> None:
    """Store a reply of this attempt (`messages`, or only its tokens) and count its tokens
    on the session, the turn and the session's usage of `model`, in one transaction; nothing
    when the attempt is no longer its worker's (`FencedOff`)."""
    session_id = turn.session_id
    tokens = usage_of(usage)
    model = model[: Turn._meta.get_field("model").max_length]
    with transaction.atomic():
        # The session's row, then the turn's (share-locked by the fence), then the stream's.
        session_lock(session_id)
        if not fence_holds(fence or turn_fence(turn)):
            raise FencedOff(session_id)
        if messages is not None:
            turn_record(
                session_id=session_id,
                messages=messages,
                usage=usage,
                agent_version_id=turn.agent_version_id,
            )
        else:
            tokens_add(session_id=session_id, usage=usage)
        with prepared_cursor() as cursor:
            cursor.execute(
                _TURN_USAGE_SQL,
                [
                    tokens.tokens_in,
                    tokens.tokens_out,
                    tokens.cache_read,
                    tokens.cache_write,
                    model,
                    model,
                    turn.pk,
                ],
            )
        add_session_usage(session_id, model, tokens)


class TurnStore(DjangoStore):
    """A turn attempt's store: fenced, and its replies' tokens counted with them (see the
    module). `model()` names the model the attempt talks to; `stored(model, usage)` is told
    each usage once it is committed (the metrics)."""

    def __init__(
        self,
        turn: Turn,
        *,
        inbox_ttl=None,
        model: Callable[[], str],
        stored: Callable[[str, Usage], None] | None = None,
        fence: Fence | None = None,
    ) -> None:
        # `fence`: the turn's own unless the caller narrows it (a person took the chat over).
        self.turn_fence = fence or turn_fence(turn)
        super().__init__(
            turn.session_id,
            inbox_ttl=inbox_ttl,
            fence=self.turn_fence,
            agent_version_id=turn.agent_version_id,
        )
        self.turn = turn
        self._model = model
        self._stored = stored
        self.recorded = Usage()

    async def record_turn(self, messages: list[CoreMessage], usage: TokenUsage) -> None:
        await self._record(usage, messages)

    async def add_tokens(self, usage: TokenUsage) -> None:
        await self._record(usage, None)

    async def _record(self, usage: TokenUsage, messages: list[CoreMessage] | None) -> None:
        model = self._model()
        await sync_to_async(healing(turn_usage_record), thread_sensitive=True)(
            turn=self.turn, model=model, usage=usage, messages=messages, fence=self.turn_fence
        )
        tokens = usage_of(usage)
        self.recorded = self.recorded + tokens
        if self._stored is not None:
            self._stored(model, tokens)
