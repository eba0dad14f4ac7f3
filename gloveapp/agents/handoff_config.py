"""An agent's handoff setting (its GLOVE_AGENTS entry's "handoff"), validated:

    "handoff": {"group": "baristas",          # whose queue a chat goes to (a Group's name)
                "tool": True,                 # the agent gets `glove_request_human`
                "after_failed_turns": 3,      # hand off after 3 turns in a row that failed
                                              # or were refused (0 or absent: never)
                "max_queue_wait_seconds": 600,   # then the customer is told, staff e-mailed
                "opening_hours": ["09:00", "17:00"],  # people answer then (TIME_ZONE)
                "closed_text": "..."}         # what the customer reads outside them

An agent without it never hands off by itself; staff may still take over its chats and a
customer may still ask for a person (the queue is then everyone's on staff).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from gloveapp.agents.config import AgentSpec, get_agent_spec

KEYS = frozenset(
    {
        "group",
        "tool",
        "after_failed_turns",
        "max_queue_wait_seconds",
        "opening_hours",
        "closed_text",
    }
)


@dataclass(frozen=True, slots=True)
class HandoffConfig:
    enabled: bool = False
    group: str = ""
    tool: bool = False
    after_failed_turns: int = 0
    max_queue_wait_seconds: int = 0
    opening_hours: tuple[time, time] | None = None
    closed_text: str = ""

    def open_at(self, moment: datetime) -> bool:
        """Do people answer at `moment` (in TIME_ZONE)? Always, without opening hours."""
        if self.opening_hours is None:
            return True
        start, end = self.opening_hours
        now = timezone.localtime(moment).time()
        return start <= now < end if start <= end else now >= start or now < end


def handoff_of(spec: AgentSpec) -> HandoffConfig:
    return handoff_from(spec.name, spec.handoff)


def handoff_from(agent_name: str, raw: dict | None) -> HandoffConfig:
    """The `handoff` entry of the agent named so, read and checked (`manage.py check` calls
    it too: a typo in a key must not turn the handoff off unnoticed)."""
    if not raw:
        return HandoffConfig()
    where = f"GLOVE_AGENTS[{agent_name!r}]['handoff']"
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown key(s) {', '.join(unknown)}")
    group = raw.get("group", "")
    if not isinstance(group, str) or len(group) > 150:
        raise ImproperlyConfigured(f"{where}['group'] must be a group's name")
    tool = raw.get("tool", True)
    if not isinstance(tool, bool):
        raise ImproperlyConfigured(f"{where}['tool'] must be true or false")
    after = raw.get("after_failed_turns", 0) or 0
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ImproperlyConfigured(f"{where}['after_failed_turns'] must be a whole number >= 0")
    wait = raw.get("max_queue_wait_seconds", 0) or 0
    if not isinstance(wait, int) or isinstance(wait, bool) or wait < 0:
        raise ImproperlyConfigured(f"{where}['max_queue_wait_seconds'] must be seconds >= 0")
    closed_text = raw.get("closed_text", "")
    if not isinstance(closed_text, str):
        raise ImproperlyConfigured(f"{where}['closed_text'] must be a string")
    return HandoffConfig(
        enabled=True,
        group=group,
        tool=tool,
        after_failed_turns=after,
        max_queue_wait_seconds=wait,
        opening_hours=_hours(raw.get("opening_hours"), where),
        closed_text=closed_text,
    )


def _hours(raw: object, where: str) -> tuple[time, time] | None:
    if raw is None:
        return None
    problem = ImproperlyConfigured(f"{where}['opening_hours'] must be ['HH:MM', 'HH:MM']")
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        raise problem
    try:
        start, end = (time.fromisoformat(value) for value in raw)
    except (TypeError, ValueError):
        raise problem from None
    return start, end


def agent_handoff(agent_name: str) -> HandoffConfig:
    """The handoff setting of the agent named so; off when it has none or does not exist."""
    try:
        return handoff_of(get_agent_spec(agent_name))
    except ImproperlyConfigured:
        return HandoffConfig()


def agent_handoff_group(agent_name: str) -> str:
    """The handoff group of the agent named so; "" when it has none or does not exist."""
    return agent_handoff(agent_name).group
