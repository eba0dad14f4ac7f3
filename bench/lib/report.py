"""What every bench script prints: its measures as rows, and its goals with a verdict.

`bench/run_all.py` turns `measures` into one table per script and every script's `goals`
into bench/README.md's goals table, so the table a reader sees is the last run's, verdicts
included, never copied by hand.
"""

from __future__ import annotations

from typing import Any


def goal(issue: int, text: str, measured: str, met: bool) -> dict[str, Any]:
    """One goal of an issue: what it asks (`text`), what this run measured, and whether
    that meets it."""
    return {"issue": issue, "goal": text, "measured": measured, "met": bool(met)}


def number(value: float, digits: int = 1) -> str:
    """1234.5 -> '1,234.5' (the docs' style)."""
    return f"{value:,.{digits}f}" if digits else f"{value:,.0f}"


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest sample with `fraction` of them at or
    below it."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]
