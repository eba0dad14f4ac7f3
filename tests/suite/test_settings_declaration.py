"""Every environment variable is declared once, in gloveapp/conf.py, and read through it.

The settings reference in docs/ is generated from the declarations, so these tests are what
keep the reference complete: a variable the code reads but nobody declared fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gloveapp.conf import DECLARATIONS, SETTINGS, env

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gloveapp", "inbox", "mesh")

# A read of an environment variable by name: os.environ.get("X"), os.environ["X"],
# os.getenv("X"), env("X") / _env("X"), and the providers' _require_key(kwargs, "X", ...).
READ = re.compile(
    r"""(?:environ\.get|environ\[|getenv|\benv|\b_env|_require_key)\(?\s*(?:kwargs,\s*)?["']([A-Z][A-Z0-9_]+)["']"""
)


def names_read_by_the_code() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    declarations = ROOT / "gloveapp" / "conf.py"
    sources = [
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path != declarations
    ]
    for path in [*sources, ROOT / "manage.py"]:
        for name in READ.findall(path.read_text()):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_it_declares_every_environment_variable_the_code_reads():
    undeclared = {
        name: where for name, where in names_read_by_the_code().items() if name not in SETTINGS
    }

    assert undeclared == {}, "declare these in gloveapp/conf.py"


def test_it_reads_every_declared_variable_somewhere():
    read = names_read_by_the_code()

    assert [var.name for var in DECLARATIONS if var.name not in read] == []


def test_it_reads_no_environment_variable_in_settings_but_through_the_declarations():
    source = (ROOT / "gloveapp" / "settings.py").read_text()

    assert "os.environ" not in source
    assert "getenv" not in source


def test_it_takes_the_declared_default_for_an_unset_or_empty_variable():
    assert env("GLOVE_TURN_MAX_ATTEMPTS", environ={}) == 3
    assert env("GLOVE_TURN_MAX_ATTEMPTS", environ={"GLOVE_TURN_MAX_ATTEMPTS": " "}) == 3
    assert env("GLOVE_TURN_MAX_ATTEMPTS", environ={"GLOVE_TURN_MAX_ATTEMPTS": "7"}) == 7


def test_it_parses_each_kind():
    environ = {
        "DEBUG": "yes",
        "GLOVE_LIVE_POLL_SECONDS": "0.5",
        "ALLOWED_HOSTS": "a.example, b.example,",
        "MESH_SIGNING_KEYS": "a=x, b=y",
    }

    assert env("DEBUG", environ=environ) is True
    assert env("GLOVE_LIVE_POLL_SECONDS", environ=environ) == 0.5
    assert env("ALLOWED_HOSTS", environ=environ) == ["a.example", "b.example"]
    assert env("MESH_SIGNING_KEYS", environ=environ) == {"a": "x", "b": "y"}


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("DEBUG", "maybe", "DEBUG must be a boolean"),
        ("GLOVE_TURN_MAX_ATTEMPTS", "three", "GLOVE_TURN_MAX_ATTEMPTS must be a whole number"),
        ("GLOVE_SERVER", "cgi", "GLOVE_SERVER must be one of asgi, wsgi, granian"),
        ("MESH_SIGNING_KEYS", "a", "MESH_SIGNING_KEYS must look like agent=secret"),
    ],
)
def test_it_names_the_variable_when_a_value_is_wrong(name, raw, message):
    with pytest.raises(ValueError, match=message):
        env(name, environ={name: raw})


def test_it_refuses_an_undeclared_name():
    with pytest.raises(KeyError, match="not declared"):
        env("GLOVE_NOT_A_SETTING", environ={})


def test_it_keeps_a_declared_default_in_one_place():
    with pytest.raises(TypeError, match=r"declared in gloveapp/conf\.py"):
        env("GLOVE_TURN_MAX_ATTEMPTS", default=4, environ={})
    with pytest.raises(TypeError, match="pass default="):
        env("GLOVE_MESH_TURNS_PER_MINUTE", environ={})
