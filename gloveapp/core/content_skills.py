"""Content skills (glove-core's `content-skills.ts` and `content-skills-fs.ts`): skills that
are data, read by the agent with `glove_read_skill` and by users with `/name`.

    use_read_skill(glove, [ContentSkill(name="python-debug", description="...", content="...",
                                        sections={"examples": "..."})])
    skills = load_content_skills_from_fs("skills/")   # <name>/SKILL.md + sibling .md sections
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from gloveapp.core.tools import Tool, ToolContext
from gloveapp.core.types import ToolResultData

if TYPE_CHECKING:
    from gloveapp.core.glove import Glove

READ_SKILL_TOOL_NAME = "glove_read_skill"
CHARS_PER_TOKEN = 4
DEFAULT_LISTING_BUDGET_TOKENS = 2000
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True, slots=True)
class ContentSkill:
    name: str
    description: str
    content: str
    path: str | None = None
    sections: Mapping[str, str] | None = None
    priority: float | None = None
    hidden: bool = False

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ContentSkill:
        known = {"name", "description", "content", "path", "sections", "priority", "hidden"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}")
        for key in ("name", "description", "content"):
            if not isinstance(raw.get(key), str):
                raise ValueError(f"{key}: a string")
        return cls(**{key: raw[key] for key in known if key in raw})

    def summary(self) -> SkillSummary:
        return SkillSummary(
            name=self.name,
            description=self.description,
            path=self.path,
            sections=list(self.sections) if self.sections else None,
            priority=self.priority,
            hidden=self.hidden,
        )


@dataclass(frozen=True, slots=True)
class SkillSummary:
    name: str
    description: str
    path: str | None = None
    sections: list[str] | None = None
    priority: float | None = None
    hidden: bool = False


@dataclass(frozen=True, slots=True)
class SkillReadResult:
    name: str
    description: str
    content: str
    path: str | None = None
    section: str | None = None
    available_sections: list[str] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.path is not None:
            data["path"] = self.path
        data["content"] = self.content
        if self.section is not None:
            data["section"] = self.section
        if self.available_sections is not None:
            data["available_sections"] = self.available_sections
        return data


class SkillReader(Protocol):
    async def list(self) -> list[SkillSummary]: ...

    async def read(self, name: str, section: str | None = None) -> SkillReadResult | None: ...


class MemorySkillReader:
    def __init__(self, skills: Iterable[ContentSkill]) -> None:
        self._skills = {skill.name: skill for skill in skills}

    async def list(self) -> list[SkillSummary]:
        return [skill.summary() for skill in self._skills.values()]

    async def read(self, name: str, section: str | None = None) -> SkillReadResult | None:
        skill = self._skills.get(name)
        if skill is None:
            return None
        available = list(skill.sections) if skill.sections else None
        if section:
            body = (skill.sections or {}).get(section)
            if not body:
                return None
            return SkillReadResult(
                skill.name, skill.description, body, skill.path, section, available
            )
        return SkillReadResult(
            skill.name, skill.description, skill.content, skill.path, None, available
        )


def _escape_attr(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def _escape_text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _full_line(summary: SkillSummary) -> str:
    sections = f' sections="{",".join(summary.sections)}"' if summary.sections else ""
    return (
        f'  <skill name="{_escape_attr(summary.name)}"{sections}>'
        f"{_escape_text(summary.description)}</skill>"
    )


def _name_only_line(summary: SkillSummary) -> str:
    return f'  <skill name="{_escape_attr(summary.name)}" />'


def render_skill_listing(
    summaries: list[SkillSummary], budget_tokens: int = DEFAULT_LISTING_BUDGET_TOKENS
) -> str:
    """The `<available_skills>` block: by priority, descriptions while the budget lasts,
    then name-only lines, then a count of the skills left out."""
    visible = [s for s in summaries if not s.hidden]
    if not visible:
        return "<available_skills>\n  <!-- no skills registered -->\n</available_skills>"
    char_budget = budget_tokens * CHARS_PER_TOKEN
    # JS: priority descending, then localeCompare of the names (case-insensitive first).
    ranked = sorted(visible, key=lambda s: (-(s.priority or 0), s.name.lower(), s.name))
    used = len("<available_skills>\n") + len("\n</available_skills>")
    full: list[str] = []
    full_names: set[str] = set()
    for summary in ranked:
        line = _full_line(summary)
        if used + len(line) + 1 <= char_budget:
            full.append(line)
            full_names.add(summary.name)
            used += len(line) + 1
    if len(full) == len(ranked):
        return "<available_skills>\n" + "\n".join(full) + "\n</available_skills>"
    elided = [s for s in ranked if s.name not in full_names]
    tail: list[str] = []
    for summary in elided:
        line = _name_only_line(summary)
        if used + len(line) + 1 <= char_budget:
            tail.append(line)
            used += len(line) + 1
    left_out = len(elided) - len(tail)
    omitted = (
        f"  <!-- {left_out} more skill{'' if left_out == 1 else 's'} omitted; "
        "call glove_read_skill with the name to load -->"
        if left_out
        else ""
    )
    body = "\n".join(line for line in [*full, *tail, omitted] if line)
    return f"<available_skills>\n{body}\n</available_skills>"


def render_skill_read_result_xml(result: SkillReadResult) -> str:
    attrs = " ".join(
        part
        for part in (
            f'name="{_escape_attr(result.name)}"',
            f'path="{_escape_attr(result.path)}"' if result.path else "",
            f'section="{_escape_attr(result.section)}"' if result.section else "",
        )
        if part
    )
    sections = (
        f"\n<sections>{','.join(result.available_sections)}</sections>"
        if result.available_sections
        else ""
    )
    return f"<skill {attrs}>\n<content>\n{result.content}\n</content>{sections}\n</skill>"


def render_read_skill_description(
    summaries: list[SkillSummary],
    budget_tokens: int = DEFAULT_LISTING_BUDGET_TOKENS,
    suffix: str | None = None,
) -> str:
    preamble = (
        "Read a registered skill. Returns the skill's content wrapped in "
        "`<skill>...<content>...</content></skill>` along with a `path` handle (opaque — your "
        "reader interprets it) and the list of available sections. Pass `section` to fetch a "
        "specific section like 'api-reference' or 'examples'. Skills listed by name only "
        "(without a description) are still readable — call this tool with the name to load "
        "the content."
    )
    tail = f"\n\n{suffix}" if suffix else ""
    return f"{preamble}\n\n{render_skill_listing(summaries, budget_tokens)}{tail}"


class ReadSkillInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(
        description="Name of the skill to read. Must be one of the skills listed in this "
        "tool's description."
    )
    section: str | None = Field(
        default=None,
        description="Optional section to retrieve (e.g. 'api-reference', 'examples'). Omit to "
        "get the main content plus a list of available sections.",
    )


READ_SKILL_SCHEMA = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": ReadSkillInput.model_fields["name"].description},
        "section": {
            "type": "string",
            "description": ReadSkillInput.model_fields["section"].description,
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}


def create_read_skill_tool(
    reader: SkillReader,
    *,
    tool_name: str = READ_SKILL_TOOL_NAME,
    listing_budget_tokens: int = DEFAULT_LISTING_BUDGET_TOKENS,
    initial_summaries: list[SkillSummary] | None = None,
    description_suffix: str | None = None,
) -> Tool:
    async def run(validated: ReadSkillInput, ctx: ToolContext) -> ToolResultData:
        result = await reader.read(validated.name, validated.section)
        if result is None:
            known = ", ".join(s.name for s in await reader.list() if not s.hidden) or "(none)"
            note = f' (section "{validated.section}")' if validated.section else ""
            return ToolResultData.error(
                f'Skill "{validated.name}"{note} not found. Known skills: {known}.'
            )
        return ToolResultData.success(
            render_skill_read_result_xml(result), render_data=result.to_dict()
        )

    return Tool(
        name=tool_name,
        description=render_read_skill_description(
            initial_summaries or [], listing_budget_tokens, description_suffix
        ),
        run=run,
        input_model=ReadSkillInput,
        json_schema=READ_SKILL_SCHEMA,
    )


def use_read_skill(
    glove: Glove,
    skills: Iterable[ContentSkill | Mapping[str, Any]],
    *,
    listing_budget_tokens: int = DEFAULT_LISTING_BUDGET_TOKENS,
    tool_name: str = READ_SKILL_TOOL_NAME,
    description_suffix: str | None = None,
    wire_user_directives: bool = True,
) -> Glove:
    """Fold `glove_read_skill` over these skills and (by default) make each `/name`."""
    items = [s if isinstance(s, ContentSkill) else ContentSkill.from_mapping(s) for s in skills]
    reader = MemorySkillReader(items)
    glove.fold(
        create_read_skill_tool(
            reader,
            tool_name=tool_name,
            listing_budget_tokens=listing_budget_tokens,
            initial_summaries=[s.summary() for s in items],
            description_suffix=description_suffix,
        )
    )
    if wire_user_directives:
        for skill in items:
            glove.define_skill(skill.name, skill.content, description=skill.description)
    return glove


def load_content_skills_from_fs(
    root: str | os.PathLike[str],
    *,
    main_file: str = "SKILL.md",
    extensions: tuple[str, ...] = (".md",),
) -> list[ContentSkill]:
    """Claude Code-style skills: `<root>/<name>/SKILL.md` (optional `---` front matter with
    name, description, priority, hidden) and sibling `.md` files as sections."""
    base = Path(root)
    skills: list[ContentSkill] = []
    try:
        folders = sorted(os.listdir(base))
    except OSError:
        return []
    for folder_name in folders:
        folder = base / folder_name
        main = folder / main_file
        if not folder.is_dir() or not main.is_file():
            continue
        meta, body = _front_matter(main.read_text(encoding="utf-8"))
        sections = {
            child.stem: child.read_text(encoding="utf-8")
            for child in sorted(folder.iterdir())
            if child.name != main_file and child.suffix in extensions and child.is_file()
        }
        priority: float | None
        try:
            priority = float(meta["priority"]) if "priority" in meta else None
        except ValueError:
            priority = None
        skills.append(
            ContentSkill(
                name=meta.get("name", "").strip() or folder_name,
                description=meta.get("description", "").strip()
                or f"Skill loaded from {folder_name}.",
                content=body,
                path=str(folder),
                sections=sections or None,
                priority=priority,
                hidden=meta.get("hidden") == "true",
            )
        )
    return skills


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    cursor = 1
    while cursor < len(lines) and lines[cursor].strip() != "---":
        key, sep, value = lines[cursor].partition(":")
        if sep and key.strip():
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            meta[key.strip()] = value
        cursor += 1
    if cursor >= len(lines):
        return {}, text
    return meta, "\n".join(lines[cursor + 1 :]).lstrip("\n")
