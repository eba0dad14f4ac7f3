"""The layering is checked, not just written down: `lint-imports` (run by `make lint`) fails
when a module imports upwards, and passes on the tree as it is."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts, to break on purpose."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "static", "templates")
    for package in ("gloveapp", "inbox", "mesh"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    # The copy comes first on the path, ahead of the project's own (editable) install.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )


def add_import(tree: Path, module: str, line: str) -> None:
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.process
def test_it_keeps_every_contract_on_the_real_tree(tree):
    result = lint_imports(tree)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.process
def test_it_fails_when_the_runtime_imports_django(tree):
    add_import(tree, "gloveapp/core/types.py", "import django.db  # noqa")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "import no Django" in result.stdout
    assert "BROKEN" in result.stdout


@pytest.mark.process
def test_it_fails_when_the_inbox_imports_an_edge(tree):
    add_import(tree, "inbox/services.py", "import gloveapp.api.common.access  # noqa")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "No domain app imports an edge" in result.stdout
    assert "BROKEN" in result.stdout


@pytest.mark.process
def test_it_fails_on_a_new_cycle_between_apps(tree):
    # conversations sits below inbox: importing it back would be a cycle.
    add_import(tree, "gloveapp/conversations/services.py", "import inbox.models  # noqa")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "Layers" in result.stdout


@pytest.mark.process
def test_it_fails_when_an_edge_imports_another_edge(tree):
    add_import(tree, "gloveapp/pages/views.py", "import gloveapp.api.common.access  # noqa")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "gloveapp.pages is not allowed to import gloveapp.api" in result.stdout


@pytest.mark.process
def test_it_fails_when_the_worker_imports_the_queue_inside_a_function(tree):
    # The circle the turns once had, held by an import inside a function.
    add_import(
        tree,
        "gloveapp/turns/engine.py",
        "def _requeue():\n    from gloveapp.turns.queue.tasks import enqueue_session  # noqa",
    )

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "No circle of modules inside any package BROKEN" in result.stdout
    assert "gloveapp.turns.engine is not allowed to import gloveapp.turns.queue" in result.stdout


@pytest.mark.process
def test_it_fails_on_a_circle_of_modules_inside_the_mesh_core(tree):
    add_import(
        tree,
        "mesh/core/tools.py",
        "import typing\nif typing.TYPE_CHECKING:\n    from mesh.core.mount import MeshMount  # noqa",
    )

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "No circle of modules inside any package BROKEN" in result.stdout
    assert "No cycles are allowed in mesh.core" in result.stdout


def test_it_finds_no_query_in_the_pages():
    # Pages read through the domain apps' selectors, as writes go through services.
    queries = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "gloveapp" / "pages").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in ("objects", "raw", "extra")
    ]

    assert queries == []


def _circles(graph, package: str) -> list[list[str]]:
    """The circles of files inside `package`: strongly connected groups of its modules, by
    the imports among them (inside functions and under TYPE_CHECKING included)."""
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in edges[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = []
            while True:
                other = stack.pop()
                group.append(other)
                if other == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(modules):
        if module not in order:
            visit(module)
    return circles


@pytest.mark.parametrize("package", ["gloveapp.turns", "mesh.core"])
def test_no_files_import_each_other_in_a_circle(package):
    # The lint's acyclic contract checks siblings level by level; this checks the files of
    # the whole package at once (grimp, which import-linter builds on).
    import grimp

    graph = grimp.build_graph("gloveapp", "inbox", "mesh", cache_dir=None)

    assert _circles(graph, package) == []


def test_it_finds_a_circle_of_files_held_by_an_import_inside_a_function():
    import grimp

    graph = grimp.ImportGraph()
    for importer, imported in [
        ("gloveapp.turns.public", "gloveapp.turns.queue.tasks"),
        ("gloveapp.turns.queue.tasks", "gloveapp.turns.engine"),
        ("gloveapp.turns.engine", "gloveapp.turns.queue.tasks"),  # the one inside a function
        ("gloveapp.turns.engine", "gloveapp.core.agent"),
    ]:
        graph.add_import(importer=importer, imported=imported)

    assert _circles(graph, "gloveapp.turns") == [
        ["gloveapp.turns.engine", "gloveapp.turns.queue.tasks"]
    ]


@pytest.mark.process
def test_it_fails_when_the_shared_code_imports_an_app(tree):
    add_import(tree, "gloveapp/lib/paging.py", "import gloveapp.conversations.models  # noqa")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "gloveapp.lib imports no app" in result.stdout
    assert "BROKEN" in result.stdout


@pytest.mark.process
def test_it_fails_when_one_audience_of_the_api_imports_another(tree):
    # The agent API reaching into the remote store's views: shared code belongs in common/.
    add_import(tree, "gloveapp/api/agents/turns.py", "import gloveapp.api.store.sessions  # noqa")

    result = lint_imports(tree)

    assert result.returncode != 0
    assert "api/: the audiences side by side over the shared layer BROKEN" in result.stdout
    assert "gloveapp.api.agents is not allowed to import gloveapp.api.store" in result.stdout
