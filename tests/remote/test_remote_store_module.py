"""`RemoteStore` is for agents in other processes: it must not need Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process
def test_it_imports_without_django():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'django', 'rest_framework'}:\n"
        "            raise ImportError('django is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import gloveapp.remote.remote_store as module\n"
        "from gloveapp.core.store import supports_inbox, supports_tasks, supports_permissions\n"
        "store = module.RemoteStore('http://127.0.0.1:1', 'token', 'glove_x')\n"
        "assert supports_inbox(store) and supports_tasks(store) and supports_permissions(store)\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
