"""`make bench`: run every bench/*.py, collect what each prints, write the results.

Each script is a program of its own that prints one JSON document on stdout (progress goes
to stderr). Documents with a `measures` list contribute one result per measure; any other
document contributes one result per number in it (its path as the measure's name), so a
new script needs no change here. Writes:

- bench/results.json: a list, one object per measure, each with the script, the machine,
  the date and the script's configuration;
- bench/results.md: the same as Markdown tables, which this runner also copies into
  bench/README.md between `<!-- bench:start -->` and `<!-- bench:end -->`.

    .venv/bin/python bench/run_all.py [--only rest,live] [--no-readme]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.lib.machine import machine  # noqa: E402

BENCH = ROOT / "bench"
RESULTS_JSON = BENCH / "results.json"
RESULTS_MD = BENCH / "results.md"
README = BENCH / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
# chaos.py: `make chaos`, faults, not speed; scale.py builds ten million rows: run on its own.
SKIP = {"run_all.py", "chaos.py", "scale.py"}
MAX_FLAT_ROWS = 60


def scripts(only: set[str] | None) -> list[Path]:
    found = sorted(p for p in BENCH.glob("*.py") if p.name not in SKIP)
    return [p for p in found if only is None or p.stem in only]


def run(script: Path) -> tuple[Any, float, str | None]:
    started = time.monotonic()
    env = dict(os.environ)
    # Benchmarks that need Redis use the caller's own database (helpers share the server).
    if "TEST_REDIS_URL" in env:
        env.setdefault("BENCH_REDIS_URL", env["TEST_REDIS_URL"])
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    seconds = round(time.monotonic() - started, 1)
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None, seconds, f"exit {done.returncode}; stdout was not one JSON document"
    error = None if done.returncode == 0 else f"exit {done.returncode}"
    return document, seconds, error


def flatten(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in flatten(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [item for i, v in enumerate(value) for item in flatten(v, f"{path}[{i}]")]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [(path, value)]
    return []


def results_of(script: Path, document: Any, seconds: float, error: str | None) -> list[dict]:
    base = {
        "script": f"bench/{script.name}",
        "benchmark": script.stem,
        "machine": (document or {}).get("machine") or machine(),
        "date": (document or {}).get("date") or datetime.now(UTC).isoformat(timespec="seconds"),
        "configuration": (document or {}).get("configuration", {}),
        "seconds": seconds,
    }
    if error is not None or not isinstance(document, dict):
        return [{**base, "error": error or "no JSON object printed"}]
    if isinstance(document.get("measures"), list):
        results = [{**base, **measure} for measure in document["measures"]]
        if document.get("ratios"):
            results.append({**base, "measure": "ratios", "ratios": document["ratios"]})
        results += [{**base, "measure": "goal", **g} for g in document.get("goals", [])]
        return results
    rest = {k: v for k, v in document.items() if k not in {"machine", "date", "configuration"}}
    return [{**base, "measure": path, "value": value} for path, value in flatten(rest)]


def markdown(results: list[dict]) -> str:
    lines: list[str] = []
    first = results[0] if results else {}
    host = first.get("machine", {})
    lines.append(
        f"Measured {first.get('date', '?')} on {host.get('cpus', '?')} CPUs "
        f"({host.get('cpu', '?')}), load average at start {host.get('load_average')}; "
        "a shared machine: compare figures within one run (the ratios), not across runs."
    )
    goals = [r for r in results if r.get("measure") == "goal"]
    if goals:
        lines += ["", "**Goals** (each judged by the script that measures it, in this run)", ""]
        lines += ["| issue | goal | measured | |", "| --- | --- | --- | --- |"]
        for row in sorted(goals, key=lambda r: r["issue"]):
            verdict = "met" if row["met"] else "**missed**"
            lines.append(
                f"| {row['issue']} | {_cell(row['goal'])} | {_cell(row['measured'])} | {verdict} |"
            )
    by_script: dict[str, list[dict]] = {}
    for result in results:
        by_script.setdefault(result["script"], []).append(result)
    for script, rows in by_script.items():
        lines += ["", f"**{script}** ({rows[0].get('date', '?')}, {rows[0].get('seconds')} s)", ""]
        if rows[0].get("error"):
            lines.append(f"failed: {rows[0]['error']}")
            continue
        ratios = [r["ratios"] for r in rows if r.get("measure") == "ratios"]
        rows = [r for r in rows if r.get("measure") not in ("ratios", "goal")]
        columns = [
            k
            for k in dict.fromkeys(k for r in rows for k in r)
            if k not in {"script", "benchmark", "machine", "date", "configuration", "seconds"}
            and any(r.get(k) not in (None, "") for r in rows)
        ]
        lines.append("| " + " | ".join(columns) + " |")
        lines.append("|" + " --- |" * len(columns))
        for row in rows[:MAX_FLAT_ROWS]:
            lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
        if len(rows) > MAX_FLAT_ROWS:
            lines.append(f"| … {len(rows) - MAX_FLAT_ROWS} more in bench/results.json |")
        for ratio in ratios:
            lines += ["", "Ratios: " + _cell(ratio)]
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_cell(v)}" for k, v in value.items())
    return str(value).replace("|", "\\|")


def splice_readme(table: str) -> bool:
    text = README.read_text()
    if START not in text or END not in text:
        return False
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    README.write_text(f"{head}{START}\n{table}{END}{tail}")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated script names (without .py)")
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None

    results: list[dict] = []
    if only is not None and RESULTS_JSON.exists():
        # A partial run replaces only its scripts' results.
        ran = {f"bench/{script.name}" for script in scripts(only)}
        results = [r for r in json.loads(RESULTS_JSON.read_text()) if r.get("script") not in ran]
    failed = False
    for script in scripts(only):
        print(f"== {script.relative_to(ROOT)}", file=sys.stderr, flush=True)
        document, seconds, error = run(script)
        failed = failed or error is not None
        results.extend(results_of(script, document, seconds, error))
    RESULTS_JSON.write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    RESULTS_MD.write_text(table)
    if not args.no_readme and splice_readme(table):
        print("bench/README.md: benchmark tables updated", file=sys.stderr)
    print(f"wrote {RESULTS_JSON.relative_to(ROOT)} and {RESULTS_MD.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
