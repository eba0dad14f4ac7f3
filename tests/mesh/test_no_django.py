"""The mesh core and the Redis transport stay usable without Django, like gloveapp/core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DJANGO_FREE = ["mesh.core", "mesh.transports.inprocess", "mesh.transports.redis_pubsub"]


@pytest.mark.process
def test_it_imports_the_mesh_core_and_its_django_free_transports_without_django():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'django' or name.startswith('django.'):\n"
        "            raise ImportError('django is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib, pkgutil, mesh.core\n"
        "for mod in pkgutil.walk_packages(mesh.core.__path__, 'mesh.core.'):\n"
        "    importlib.import_module(mod.name)\n"
        f"for name in {DJANGO_FREE!r}:\n"
        "    importlib.import_module(name)\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_no_django_free_mesh_module_mentions_django_imports():
    paths = [*(ROOT / "mesh" / "core").rglob("*.py")]
    paths += [ROOT / "mesh" / "transports" / name for name in ("inprocess.py", "redis_pubsub.py")]
    offenders = [
        str(path)
        for path in paths
        if "import django" in path.read_text() or "from django" in path.read_text()
    ]
    assert offenders == []
