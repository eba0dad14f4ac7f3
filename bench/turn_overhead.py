"""Per-turn overhead of `Glove.process_request` with `ScriptedModel` + `MemoryStore`.

Sessions are pre-filled with 1k, 10k and 100k messages and a compaction marker 20 messages
from the end, so the model's context is ~20 messages whatever the history. Two request shapes:
a text reply (1 model call) and one tool call (2 model calls). The model answers at once, so
the time measured is the runtime's own: context reads, inbox checks, persistence, events,
tool execution. Cost should not grow with the history before the marker (Decision 4).

All requests of a size run on one long-lived session; between requests (untimed) a fresh
marker and window are appended, so every request sees the same context size while the history
keeps growing. Prints JSON.

    .venv/bin/python bench/turn_overhead.py [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gloveapp.core import (
    CompactionConfig,
    Glove,
    MemoryStore,
    Message,
    ScriptedModel,
    ToolCall,
    tool,
)

HISTORY_SIZES = (1_000, 10_000, 100_000)
MESSAGES_AFTER_MARKER = 20
WARMUP = 50


@tool(description="Look up current stock for a coffee by name.")
async def check_stock(product: str) -> dict:
    return {"product": product, "in_stock": False, "eta": "unknown"}


def history(size: int) -> list[Message]:
    messages = []
    for index in range(size - MESSAGES_AFTER_MARKER - 1):
        sender = "user" if index % 2 == 0 else "agent"
        messages.append(Message(sender=sender, text=f"message {index} " + "lorem ipsum " * 8))
    messages.append(
        Message(
            sender="user", text="[Conversation summary from compaction]\n\n...", is_compaction=True
        )
    )
    for index in range(MESSAGES_AFTER_MARKER):
        sender = "agent" if index % 2 == 0 else "user"
        messages.append(Message(sender=sender, text=f"recent {index}"))
    return messages


def script(with_tool: bool) -> list:
    if with_tool:
        call = Message(
            sender="agent",
            text="",
            tool_calls=[ToolCall(tool_name="check_stock", input_args={"product": "AA"})],
        )
        return [call, "AA is out of stock."]
    return ["Hello!"]


def recent_window() -> list[Message]:
    """A fresh compaction marker and the messages after it (appended between samples)."""
    return history(MESSAGES_AFTER_MARKER + 1)


async def measure(size: int, with_tool: bool, requests: int) -> dict:
    store = MemoryStore(f"bench_{size}")
    await store.append_messages(history(size))
    # The pre-filled history is the bench's own resident data (a real deployment keeps it in
    # the database); freezing it keeps full GC passes over 100k objects out of the samples.
    gc.collect()
    gc.freeze()
    model = ScriptedModel(
        script(with_tool) * (requests + WARMUP), record_messages=False, tokens_in=1, tokens_out=1
    )
    glove = Glove(
        store=store,
        model=model,
        system_prompt="You are a bench agent.",
        compaction_config=CompactionConfig("Summarize."),
    )
    glove.fold(check_stock).build()
    samples = []
    for index in range(requests + WARMUP):
        started = time.perf_counter()
        await glove.process_request("Do you have Yirgacheffe?")
        elapsed = time.perf_counter() - started
        if index >= WARMUP:
            samples.append(elapsed * 1e6)
        context = await store.get_context_messages()
        assert len(context) == 1 + MESSAGES_AFTER_MARKER + (4 if with_tool else 2)
        # Outside the timing: a new marker and window, so every request sees the same context.
        await store.append_messages(recent_window())
    gc.unfreeze()
    samples.sort()
    model_calls = 2 if with_tool else 1
    return {
        "stored_messages_before": size,
        "stored_messages_after": len(await store.get_messages()),
        "context_messages_in_first_prompt": 1 + MESSAGES_AFTER_MARKER + 1,
        "shape": "one tool call" if with_tool else "text reply",
        "model_calls": model_calls,
        "requests": requests,
        "mean_us": round(statistics.fmean(samples), 1),
        "p50_us": round(samples[len(samples) // 2], 1),
        "p99_us": round(samples[int(len(samples) * 0.99) - 1], 1),
        "mean_us_per_model_call": round(statistics.fmean(samples) / model_calls, 1),
    }


async def main(requests: int) -> dict:
    results = []
    for with_tool in (False, True):
        for size in HISTORY_SIZES:
            results.append(await measure(size, with_tool, requests))
    by_shape: dict[str, list[float]] = {}
    for row in results:
        by_shape.setdefault(row["shape"], []).append(row["p50_us"])
    ratios = {shape: round(values[-1] / values[0], 2) for shape, values in by_shape.items()}
    return {
        "benchmark": "turn_overhead",
        "measures": [
            {
                "measure": f"{row['shape']}, {row['stored_messages_before']:,} stored",
                "model_calls": row["model_calls"],
                "p50_us": row["p50_us"],
                "p99_us": row["p99_us"],
            }
            for row in results
        ],
        "ratios": {f"{shape}: p50 t(100k)/t(1k)": ratio for shape, ratio in ratios.items()},
        "generated_by": "bench/turn_overhead.py",
        "python": platform.python_version(),
        "platform": f"{platform.system().lower()} {platform.machine()}",
        "units": "microseconds per process_request (wall time, model answers instantly)",
        "note": (
            f"compaction marker {MESSAGES_AFTER_MARKER} messages from the end; one long-lived "
            "session per size, a fresh marker + window appended (untimed) after each request"
        ),
        "results": results,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.requests)), indent=2))
