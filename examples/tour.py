"""The tutorial's Python tour, runnable: `python examples/tour.py` (add `--django` for DjangoStore).

The runtime is plain asyncio, so the tour runs in `asyncio.run`; DjangoStore needs Django set
up first (settings, then `django.setup()`), and a migrated database (`manage.py migrate`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from gloveapp.core import CompactionConfig, Glove, MemoryStore, ScriptedModel, tool


@tool
async def check_stock(product: str) -> dict:
    "How many bags of a coffee are in stock."
    return {"product": product, "bags": 0}


def make_store(use_django: bool):
    if not use_django:
        return MemoryStore("session-1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()
    from gloveapp.ormstore.store import DjangoStore

    return DjangoStore("tour-session-1")


async def main(use_django: bool = False) -> str:
    store = make_store(use_django)
    agent = (
        Glove(
            store=store,
            model=ScriptedModel(["We're out; I'll watch for a restock."]),  # or get_model(...)
            system_prompt="You are Brew, a coffee shop assistant.",
            compaction_config=CompactionConfig(
                compaction_instructions="Summarize the conversation."
            ),
        )
        .fold(check_stock)
        .build()
    )
    result = await agent.process_request("Do you have Yirgacheffe?")
    reply = result.messages[-1].text
    print(reply)
    return reply


if __name__ == "__main__":
    asyncio.run(main(use_django="--django" in sys.argv))
