"""An agent's skills, content skills and hooks from its GLOVE_AGENTS entry, applied to a
Glove (docs/howto/agents.md):

    "skills": [{"name": "brew-guide", "content": "...", "description": "...",
                "expose_to_agent": True},
               {"name": "today", "handler": "myapp.skills.today"}],   # handler(context)
    "content_skills": [{"name": ..., "description": ..., "content": ..., "sections": {...}},
                       {"directory": "skills/"}],                      # <name>/SKILL.md
    "hooks": {"/closed": "myapp.hooks.closed",                        # HookContext -> HookResult
              "before_tool": ["myapp.hooks.audit"], "after_model": [...]},

Dotted paths are imported when the agent is mounted; a wrong entry raises
ImproperlyConfigured naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from gloveapp.agents.config import AgentSpec
from gloveapp.core.content_skills import ContentSkill, load_content_skills_from_fs, use_read_skill
from gloveapp.core.glove import Glove
from gloveapp.core.hooks import HOOK_POINTS

SKILL_KEYS = {"name", "content", "handler", "description", "expose_to_agent"}


def apply_skills_and_hooks(glove: Glove, spec: AgentSpec) -> None:
    where = f"GLOVE_AGENTS[{spec.name!r}]"
    for raw in spec.skills:
        _define_skill(glove, raw, f"{where}.skills")
    content = [skill for raw in spec.content_skills for skill in _content_skills(raw, where)]
    if content:
        use_read_skill(glove, content)
    for key, value in spec.hooks.items():
        if key.startswith("/"):
            glove.define_hook(key[1:], _callable(value, f"{where}.hooks[{key!r}]"))
        elif key in HOOK_POINTS:
            for path in [value] if isinstance(value, str) or callable(value) else value:
                glove.add_hook(key, _callable(path, f"{where}.hooks[{key!r}]"))
        else:
            raise ImproperlyConfigured(
                f"{where}.hooks: {key!r} is neither '/name' nor one of {', '.join(HOOK_POINTS)}"
            )


def _define_skill(glove: Glove, raw: Any, where: str) -> None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ImproperlyConfigured(f"{where}: each skill is a dict with a 'name'")
    unknown = sorted(set(raw) - SKILL_KEYS)
    if unknown:
        raise ImproperlyConfigured(
            f"{where}[{raw['name']!r}]: unknown field(s) {', '.join(unknown)}"
        )
    if ("content" in raw) == ("handler" in raw):
        raise ImproperlyConfigured(f"{where}[{raw['name']!r}]: give content or handler")
    handler = (
        raw["content"]
        if "content" in raw
        else _callable(raw["handler"], f"{where}[{raw['name']!r}].handler")
    )
    if not isinstance(handler, str) and not callable(handler):
        raise ImproperlyConfigured(f"{where}[{raw['name']!r}].content: a string")
    glove.define_skill(
        raw["name"],
        handler,
        description=raw.get("description"),
        expose_to_agent=bool(raw.get("expose_to_agent", False)),
    )


def _content_skills(raw: Any, where: str) -> list[ContentSkill]:
    if isinstance(raw, ContentSkill):
        return [raw]
    if isinstance(raw, Mapping) and set(raw) == {"directory"}:
        folder = Path(raw["directory"])
        if not folder.is_dir():
            raise ImproperlyConfigured(f"{where}.content_skills: no directory {str(folder)!r}")
        return load_content_skills_from_fs(folder)
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(f"{where}.content_skills: each is a dict")
    try:
        return [ContentSkill.from_mapping(raw)]
    except (ValueError, TypeError) as error:
        raise ImproperlyConfigured(
            f"{where}.content_skills[{raw.get('name')!r}]: {error}"
        ) from None


def _callable(value: Any, where: str) -> Any:
    if callable(value):
        return value
    if not isinstance(value, str):
        raise ImproperlyConfigured(f"{where}: a dotted path to a function")
    try:
        found = import_string(value)
    except ImportError as error:
        raise ImproperlyConfigured(f"{where}: {value!r} cannot be imported: {error}") from None
    if not callable(found):
        raise ImproperlyConfigured(f"{where}: {value!r} is not callable")
    return found
