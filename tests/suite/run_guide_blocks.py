"""Runs one guide's python and shell blocks in order, as a reader would: `python
run_guide_blocks.py blocks.json`, in the guide's fresh environment (its folder, its `.venv`).

Python blocks share one namespace (`__name__` is "__main__") and one event loop, so a block's
top-level `await` and the client an earlier block opened both work. Shell blocks run with
bash (`set -euo pipefail`, and `set -a`: what a block assigns reaches the next block and
the settings check after them). The names a guide's Python takes from its shell (the token
step 1 printed) are the file's `names`; its `given` runs first (what the guide assumes the
reader has built). Prints the environment the blocks left, as JSON on the last line; exits
1 at the first block that fails, naming it.

`python run_guide_blocks.py --check module...`: `manage.py check` of each settings module a
guide's settings blocks made (the settings as of each block), in one process: Django is set
up on the first (DJANGO_SETTINGS_MODULE), the others' values are set over it in turn.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

PRELUDE = "set -euo pipefail\nset -a\n"


def run_shell(code: str, env: dict[str, str]) -> dict[str, str]:
    with tempfile.NamedTemporaryFile(suffix=".env", delete=False) as dump:
        path = dump.name
    script = f'{PRELUDE}{code}\nenv -0 > "{path}"\n'
    subprocess.run(["bash", "-c", script], env=env, check=True, timeout=180)
    raw = Path(path).read_bytes().decode()
    Path(path).unlink()
    return dict(entry.split("=", 1) for entry in raw.split("\0") if "=" in entry)


def check(modules: list[str]) -> None:
    import importlib

    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    for module in modules:
        print(f"--- manage.py check, the settings as of {module}", flush=True)
        values = importlib.import_module(module)
        for name in dir(values):
            if name.isupper():
                setattr(settings, name, getattr(values, name))
        call_command("check")


def main() -> None:
    if sys.argv[1] == "--check":
        check(sys.argv[2:])
        return
    spec = json.loads(Path(sys.argv[1]).read_text())
    env = dict(os.environ)
    namespace: dict = {"__name__": "__main__"}
    loop = asyncio.new_event_loop()
    for block in [*spec["given"], *spec["blocks"]]:
        print(f"--- {block['where']}", flush=True)
        try:
            if block["kind"] == "shell":
                env = run_shell(block["code"], env)
                continue
            os.environ.update(env)
            for name, variable in spec["names"].items():
                if variable in env:
                    namespace[name] = env[variable]
            namespace["__file__"] = block["source"] or str(Path.cwd() / "guide.py")
            code = compile(
                block["code"], block["where"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            )
            result = eval(code, namespace)  # the guide's own code, as written
            if inspect.iscoroutine(result):
                loop.run_until_complete(result)
        except BaseException as error:  # SystemExit too: report it and stop
            traceback.print_exc()
            print(f"BLOCK FAILED: {block['where']}: {error!r}", flush=True)
            sys.exit(1)
    sys.stdout.flush()
    print("ENV " + json.dumps(env))


if __name__ == "__main__":
    main()
