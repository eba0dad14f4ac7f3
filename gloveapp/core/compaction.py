"""Context compaction (glove-core's `Observer`, contract §4 with Decision 4).

The measured quantity is the store's token count: `tokens_in + tokens_out` summed over the
model calls since the last reset. Compaction asks the model (without tools) to summarise the
context, persists the summary as a message with `is_compaction=True`, and from then on the
model sees only messages from that marker on. Nothing is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from gloveapp.core.events import COMPACTION_END, COMPACTION_START, EventBus
from gloveapp.core.inbox_context import pending_items_summary_block
from gloveapp.core.providers.base import ModelAdapter
from gloveapp.core.store import StoreAdapter, split_at_last_compaction, supports_inbox
from gloveapp.core.types import Message, TokenUsage

# Compaction runs before persisting a tool-calling reply once the count reaches this share of
# the limit, so the reply's tool calls and results land after the summary.
ESCAPE_COMPACTION_THRESHOLD_PERCENT = 90
NO_SUMMARY_TEXT = "No summary was generated"
SUMMARY_HEADER = "[Conversation summary from compaction]"
SUMMARY_FOOTER = "[End of summary - the conversation continues from here]"


@dataclass(slots=True)
class CompactionConfig:
    """`max_turns` caps model calls per request; it does not trigger compaction."""

    compaction_instructions: str
    max_turns: int = 120
    compaction_context_limit: int = 100_000


KEPT_NOTES_HEADER = "[Notes kept from before the summary]"


def summary_message_text(summary: str, pending_block: str) -> str:
    return f"{SUMMARY_HEADER}\n\n{summary}{pending_block}\n\n{SUMMARY_FOOTER}"


async def kept_notes_block(store: StoreAdapter) -> str:
    """The notes a store keeps across compaction (`get_kept_notes`: the ends of human
    stretches, which a summary must not blur), as a block after the summary."""
    reader = getattr(store, "get_kept_notes", None)
    notes = list(await reader()) if callable(reader) else []
    if not notes:
        return ""
    return f"\n\n{KEPT_NOTES_HEADER}\n" + "\n".join(notes)


async def context_messages(store: StoreAdapter) -> list[Message]:
    """Messages from the last compaction marker on: what the model sees."""
    reader = getattr(store, "get_context_messages", None)
    if callable(reader):
        return list(await reader())
    return list(split_at_last_compaction(await store.get_messages()))


class Compactor:
    def __init__(
        self,
        *,
        store: StoreAdapter,
        model: ModelAdapter,
        events: EventBus,
        config: CompactionConfig,
    ) -> None:
        self.store = store
        self.model = model
        self.events = events
        self.config = config

    async def is_imminent(self) -> bool:
        count = await self.store.get_token_count()
        # Integer form of `count >= limit * 90 / 100`, free of float rounding.
        return count * 100 >= self.config.compaction_context_limit * (
            ESCAPE_COMPACTION_THRESHOLD_PERCENT
        )

    async def try_compaction(self) -> bool:
        if await self.store.get_token_count() < self.config.compaction_context_limit:
            return False
        await self.run_now()
        return True

    async def run_now(self) -> Message:
        count = await self.store.get_token_count()
        await self.events.emit(COMPACTION_START, {"current_token_consumption": count})
        history = await context_messages(self.store)
        request = Message(
            sender="user", text=self.config.compaction_instructions, is_compaction_request=True
        )
        # Reset before the summary call, as Glove does: the summary's own output tokens are
        # the first thing counted afterwards.
        await self.store.reset_counters()
        # No tools and no abort signal: the summary must complete once started.
        result = await self.model.prompt([*history, request], None, self.events.emit, None)
        summary = "\n".join(m.text for m in result.messages if m.sender == "agent")
        items = await self.store.get_inbox_items() if supports_inbox(self.store) else []
        summary_message = Message(
            sender="user",
            text=summary_message_text(
                summary or NO_SUMMARY_TEXT,
                pending_items_summary_block(items) + await kept_notes_block(self.store),
            ),
            is_compaction=True,
        )
        await self.store.append_messages([summary_message])
        await self.store.add_tokens(TokenUsage(tokens_in=0, tokens_out=result.tokens_out))
        await self.events.emit(
            COMPACTION_END,
            {
                "current_token_consumption": result.tokens_out,
                "summary_message": summary_message.to_dict(),
                # The summary call's usage, cache counts included when the provider
                # reported them (Glove's TokenConsumptionCounter leaves absent ones out).
                "consumption": result.usage.to_dict(),
            },
        )
        return summary_message
