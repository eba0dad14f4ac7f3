"""MkDocs hooks: the reference pages that are generated from the code when the site is built.

A page asks for a generated part with a marker line, replaced here before the page is
rendered (so the strict build checks its links and anchors like any other text):

    <!-- generated: settings -->   the environment variables, from gloveapp/conf.py
    <!-- generated: commands -->   each management command's --help
    <!-- generated: openapi -->    the REST routes, from drf-spectacular's OpenAPI schema
    <!-- generated: metrics -->    the Prometheus metrics, from gloveapp/observe/catalogue.py
    <!-- generated: spans -->      the trace spans and their attributes, from the same file
    <!-- generated: contracts -->  the import-linter contracts, from pyproject.toml

Links are written as they resolve in the repository, so they work on GitHub too: a page
links CHANGELOG.md as `../../CHANGELOG.md` and a screenshot where the browser test writes
it, `../../gloveapp/static/screenshots/chat.png`. The files in `MOUNTS` are copied into the
site, and links to them (from any page, the mounted ones included) are rewritten to the copy.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Files of the repository outside docs/ that the site carries: repository path -> site path.
MOUNTS = {
    "CHANGELOG.md": "changelog.md",
    "bench/README.md": "benchmarks.md",
    "examples/glove-react/README.md": "examples/glove-react.md",
    "examples/production.env": "examples/production.env",
    **{
        f"gloveapp/static/screenshots/{shot.name}": f"assets/screenshots/{shot.name}"
        for shot in sorted((ROOT / "gloveapp" / "static" / "screenshots").glob("*.png"))
    },
}
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
OUR_APPS = ("gloveapp", "inbox", "mesh")


@cache
def django_ready() -> None:
    """Django set up on the default settings, as `make run` has them (no env needed)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gloveapp.settings")
    import django

    django.setup()


def settings_reference() -> str:
    sys.path.insert(0, str(ROOT))
    from gloveapp.conf import reference_markdown

    return reference_markdown()


# The options every Django command has; the reference lists only each command's own.
DJANGO_OPTIONS = {
    "help",
    "version",
    "verbosity",
    "settings",
    "pythonpath",
    "traceback",
    "no_color",
    "force_color",
    "skip_checks",
}


def commands_reference() -> str:
    django_ready()
    from django.core.management import get_commands, load_command_class

    # argparse wraps help to the terminal's width: fix it, so the page is the same anywhere.
    os.environ["COLUMNS"] = "100"
    ours = [(app, name) for name, app in get_commands().items() if app.split(".")[0] in OUR_APPS]
    out = []
    for app, name in sorted(ours, key=lambda pair: pair[1]):
        parser = load_command_class(app, name).create_parser("manage.py", name)
        for action in [a for a in parser._actions if a.dest in DJANGO_OPTIONS]:
            parser._remove_action(action)
            for group in parser._action_groups:
                if action in group._group_actions:
                    group._group_actions.remove(action)
        usage = parser.format_help().rstrip()
        out += [f"### {name}", "", f"From `{app}`.", "", "```text", usage, "```", ""]
    return "\n".join(out)


def _schema() -> dict[str, Any]:
    django_ready()
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    # Through JSON: lazy strings and enums become plain values.
    return json.loads(json.dumps(schema, default=str))


def _type_of(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "allOf" in schema:
        return " & ".join(_type_of(part) for part in schema["allOf"])
    if "oneOf" in schema:
        return " or ".join(_type_of(part) for part in schema["oneOf"])
    kind = schema.get("type", "object")
    if kind == "array":
        return f"array of {_type_of(schema.get('items', {}))}"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"] if value)
    if schema.get("format"):
        return f"{kind} ({schema['format']})"
    return str(kind)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _body_types(content: dict[str, Any]) -> str:
    kinds = {_type_of(media.get("schema", {})) for media in content.values()}
    return " or ".join(sorted(kinds))


METHODS = ("get", "post", "put", "patch", "delete")


def openapi_reference() -> str:
    schema = _schema()
    operations = [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]
    # A view's docstring that many routes share is said once, at the top.
    counts: dict[str, int] = {}
    for _, _, operation in operations:
        text = operation.get("description", "").strip()
        counts[text] = counts.get(text, 0) + 1
    common = {text for text, count in counts.items() if text and count >= 5}
    out: list[str] = [f"{text}" for text in sorted(common)] + [""]
    operations.sort(key=lambda op: (op[2].get("tags") or ["other"])[0])
    tag = None
    for path, method, operation in operations:
        tags = operation.get("tags") or ["other"]
        if tags[0] != tag:
            tag = tags[0]
            out += [f"### The {tag} routes", ""]
        out += [f"#### {method.upper()} `{path}`", ""]
        description = operation.get("description", "").strip()
        if description and description not in common:
            out += [description, ""]
        params = operation.get("parameters", [])
        if params:
            out += [
                "| parameter | in | type | required | meaning |",
                "| --- | --- | --- | --- | --- |",
            ]
            for param in params:
                out.append(
                    f"| `{param['name']}` | {param['in']} | "
                    f"{_type_of(param.get('schema', {}))} | "
                    f"{'yes' if param.get('required') else 'no'} | "
                    f"{_cell(param.get('description', ''))} |"
                )
            out.append("")
        body = operation.get("requestBody", {}).get("content")
        if body:
            out += [f"Body: {_body_types(body)}.", ""]
        out += ["| status | answer |", "| --- | --- |"]
        for status, response in operation.get("responses", {}).items():
            answer = _cell(response.get("description", ""))
            if response.get("content"):
                answer = (answer + " " if answer else "") + _body_types(response["content"])
            out.append(f"| {status} | {answer} |")
        out.append("")
    out += ["### Schemas", ""]
    for name, component in schema.get("components", {}).get("schemas", {}).items():
        out += [f"#### {name}", ""]
        if component.get("description"):
            out += [_cell(component["description"]), ""]
        properties = component.get("properties")
        if properties:
            required = set(component.get("required", []))
            out += ["| field | type | required | meaning |", "| --- | --- | --- | --- |"]
            for field, spec in properties.items():
                read_only = " (read-only)" if spec.get("readOnly") else ""
                out.append(
                    f"| `{field}` | {_type_of(spec)}{read_only} | "
                    f"{'yes' if field in required else 'no'} | {_cell(spec.get('description', ''))} |"
                )
            out.append("")
        elif "enum" in component:
            out += [_type_of(component), ""]
    return "\n".join(out)


def metrics_reference() -> str:
    sys.path.insert(0, str(ROOT))
    from gloveapp.observe.catalogue import reference_markdown

    return reference_markdown()


def spans_reference() -> str:
    sys.path.insert(0, str(ROOT))
    from gloveapp.observe.catalogue import spans_reference_markdown

    return spans_reference_markdown()


def _modules(names: list[str]) -> str:
    return "; ".join(
        " \\| ".join(f"`{part.strip()}`" for part in name.split("|")) for name in names
    )


def contracts_reference() -> str:
    """The layering contracts as `pyproject.toml` states them, so the page cannot drift."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    rows = ["| contract | kind | what it says |", "| --- | --- | --- |"]
    for contract in config["contracts"]:
        kind = contract["type"]
        if kind == "layers":
            inside = contract.get("containers")
            where = f"inside {_modules(inside)}, " if inside else ""
            says = f"{where}top to bottom: {_modules(contract['layers'])}"
        elif kind == "forbidden":
            says = (
                f"{_modules(contract['source_modules'])} import none of "
                f"{_modules(contract['forbidden_modules'])}"
            )
        elif kind == "acyclic_siblings":
            says = f"no circle of modules inside any package of {_modules(contract['ancestors'])}"
        else:
            says = contract["name"]
        rows.append(
            f"| `{contract['id']}` | {kind.replace('_', ' ')} | {contract['name']}: {says} |"
        )
    return "\n".join(rows)


GENERATORS: dict[str, Callable[[], str]] = {
    "contracts": contracts_reference,
    "settings": settings_reference,
    "metrics": metrics_reference,
    "spans": spans_reference,
    "commands": commands_reference,
    "openapi": openapi_reference,
}


def on_files(files: Files, config: Any) -> Files:
    for source, target in MOUNTS.items():
        files.append(File.generated(config, target, abs_src_path=str(ROOT / source)))
    return files


def site_link(target: str, page: Any) -> str:
    """A link as it resolves in the repository -> the same file in the site."""
    if re.match(r"[a-z][a-z0-9+.-]*:|#|/", target):
        return target  # another site, an anchor on this page, or the site's root
    path, hash_, anchor = target.partition("#")
    here = Path(page.file.abs_src_path).parent
    resolved = (here / path).resolve()
    if not resolved.is_relative_to(ROOT):
        return target
    repo_path = resolved.relative_to(ROOT).as_posix()
    if resolved.is_relative_to(DOCS):
        site_path = resolved.relative_to(DOCS).as_posix()
    elif repo_path in MOUNTS:
        site_path = MOUNTS[repo_path]
    else:
        return target  # MkDocs reports it if it leads nowhere
    page_dir = posixpath.dirname(page.file.src_uri)
    return posixpath.relpath(site_path, page_dir or ".") + hash_ + anchor


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_uri}: no generator named {name!r}")
        text = GENERATORS[name]().strip()
        if not text:
            raise PluginError(f"{page.file.src_uri}: the {name} reference came out empty")
        return text

    markdown = MARKER.sub(generate, markdown)
    return LINK.sub(lambda m: m.group(1) + site_link(m.group(2), page) + m.group(3), markdown)
