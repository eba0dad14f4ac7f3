"""What every benchmark result records about where it ran."""

from __future__ import annotations

import os
import platform


def machine() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "node": platform.node(),
        "cpus": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        # Shared machines: how busy it was when the run started (1/5/15-minute load).
        "load_average": [round(x, 2) for x in load] if load else None,
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
