"""Every `pip install` a guide tells a reader to run keeps the project installable: a
third-party package is pinned to the version the project's own extras pin (a package's next
release may need what the project refuses: mcp-server-time's newest needs `mcp>=2`, the
project `mcp<2`), so following a guide never leaves `pip check` complaining."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDES = sorted([*ROOT.glob("docs/howto/*.md"), *ROOT.glob("docs/tutorial/*.md")])
_INSTALL = re.compile(r"pip install\s+(?P<args>[^`\n]+)")
_REQUIREMENT = re.compile(r"^[\"']?(?P<name>[A-Za-z0-9_.\-]+)(?P<spec>[^\"'\s]*)[\"']?$")


def project_pins() -> dict[str, str]:
    """Package name -> the `==` pin in pyproject.toml's dependencies and extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    pins = {}
    for requirement in requirements:
        name, _, version = requirement.partition("==")
        if version:
            pins[name.strip().lower()] = version.strip()
    return pins


def guide_installs() -> list[tuple[str, str, str]]:
    """(guide, package, version spec) for every package a guide's `pip install` names."""
    found = []
    for guide in GUIDES:
        for match in _INSTALL.finditer(guide.read_text()):
            for arg in match["args"].split():
                requirement = _REQUIREMENT.match(arg)
                if arg.startswith("-") or requirement is None or arg.startswith((".", "/")):
                    continue
                name = requirement["name"].lower()
                if name.startswith("glove-django") or name in {"pip", "e"}:
                    continue
                found.append((guide.name, name, requirement["spec"]))
    return found


def test_every_package_a_guide_installs_is_pinned_as_the_project_pins_it():
    pins = project_pins()
    installs = guide_installs()
    assert ("agents.md", "mcp-server-time", "==2026.8.18") in installs
    for guide, name, spec in installs:
        if name in pins:
            assert spec == f"=={pins[name]}", (
                f"{guide}: pip install {name}{spec} (pinned {pins[name]})"
            )
