"""The runtime at gloveapp/core must stay usable without Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "gloveapp" / "core"


@pytest.mark.process
def test_it_imports_without_django_installed_or_configured():
    # A fresh interpreter in which importing django fails outright.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'django' or name.startswith('django.') or name.startswith('rest_framework'):\n"
        "            raise ImportError('django is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pkgutil, importlib, gloveapp.core, gloveapp.remote\n"
        "for package in (gloveapp.core, gloveapp.remote):\n"
        "    for mod in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(mod.name)\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=CORE.parents[1]
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_no_module_in_core_mentions_django_imports():
    offenders = [
        str(path)
        for path in CORE.rglob("*.py")
        if "import django" in path.read_text() or "from django" in path.read_text()
    ]
    assert offenders == []
