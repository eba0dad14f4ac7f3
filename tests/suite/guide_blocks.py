"""A guide's fenced code blocks, and what running each one as written means.

How a block is run follows from its fence's info string and from an HTML comment on the line
before it (readers never see either):

- ```python: run, in order, in one namespace per guide (top-level `await` allowed). A block
  whose first line is `# <path>.py` is a file of the reader's project: `# settings.py` goes
  into the settings module (then `manage.py check`), any other is written (appended, for its
  second block) to that path. `<!-- settings -->` makes a block a settings snippet too, and
  `<!-- settings in GLOVE_AGENTS["coffee"] -->` one that is a part of that value (a dict
  entry, `"key": value,`), merged into it.
- ```bash / ```sh: run with bash, in order, the variables one block sets seen by the next.
- Shown, never run: the info strings in SHOWN (output, other languages, other machines'
  configuration).
- `<!-- not run: <why> -->`: a block this test leaves alone, for the reason given.

Any other block (a bare fence, an unknown language) is an error: a guide that adds one says
how it is checked, or why it is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDES = sorted([*ROOT.glob("docs/howto/*.md"), *ROOT.glob("docs/tutorial/*.md")])

# Output, payloads and files of other programs: shown to the reader, never run.
SHOWN = frozenset({"text", "json", "yaml", "sql", "ts", "django", "nginx", "ini", "systemd"})
PYTHON = frozenset({"python", "py"})
SHELL = frozenset({"bash", "sh"})

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_NOTE = re.compile(r"^\s*<!--\s*(?P<note>(?:not run|settings)\b.*?)\s*-->\s*$")
_FILE = re.compile(r"^# (?P<path>[\w./-]+\.py)\b")
_INCLUDE = re.compile(r'^--8<-- "(?P<path>[^"]+)"$')
_INTO = re.compile(r'^settings in (?P<name>[A-Z_]+)(?P<keys>(?:\["[^"]+"\])*)$')


@dataclass(frozen=True)
class Block:
    guide: str
    line: int
    info: str
    code: str
    note: str  # the `<!-- not run: … -->` / `<!-- settings … -->` before it, or ""
    source: str = ""  # the file a `--8<--` include brought in

    @property
    def where(self) -> str:
        return f"{self.guide}:{self.line}"

    @property
    def kind(self) -> str:
        """shown, skipped, settings, file, python or shell; ValueError for a block this
        test does not know how to run."""
        if self.note.startswith("not run"):
            if not self.note.partition(":")[2].strip():
                raise ValueError(f"{self.where}: `<!-- not run: … -->` without a reason")
            return "skipped"
        if self.info in SHOWN:
            return "shown"
        if self.info in PYTHON:
            if self.note.startswith("settings") or self.file == "settings.py":
                return "settings"
            return "file" if self.file else "python"
        if self.info in SHELL:
            return "shell"
        raise ValueError(
            f"{self.where}: a ```{self.info} block neither run nor marked: give it a language "
            f"this test runs ({', '.join(sorted(PYTHON | SHELL))}), one it shows "
            f"({', '.join(sorted(SHOWN))}), or a `<!-- not run: why -->` line before it"
        )

    @property
    def file(self) -> str:
        found = _FILE.match(self.code)
        return found["path"] if found else ""

    def settings_code(self) -> str:
        """The block as lines of a settings module: itself, or a part merged into a value."""
        if self.note in ("settings", "") or self.file == "settings.py":
            return self.code
        into = _INTO.match(self.note)
        if into is None:
            raise ValueError(f"{self.where}: cannot read `<!-- {self.note} -->`")
        keys = re.findall(r'\["([^"]+)"\]', into["keys"])
        return f"_merge_into({into['name']}, {keys!r}, {{\n{self.code}\n}})"


def blocks(guide: Path, root: Path = ROOT) -> list[Block]:
    lines = guide.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        start, fence, indent = index, opening["fence"], len(opening["indent"])
        body = []
        index += 1
        while index < len(lines) and lines[index].strip() != fence:
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index])
            index += 1
        index += 1
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        note = _NOTE.match(before)
        code = "\n".join(body) + "\n"
        source = ""
        include = _INCLUDE.match(code.strip())
        if include:
            source = str(root / include["path"])
            code = Path(source).read_text()
        found.append(
            Block(
                guide=str(guide.relative_to(root / "docs")),
                line=start + 1,
                info=opening["info"].strip().split(" ")[0],
                code=code,
                note=note["note"] if note else "",
                source=source,
            )
        )
    return found
