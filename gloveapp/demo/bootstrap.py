"""Set up the demo: a customer, a staff member, the shop's shelf and a first conversation.

`make run` calls this through `manage.py setup_demo` on every start, so it is idempotent:
existing users keep their passwords unless a password is given in the environment.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password
from django.contrib.auth.models import Group
from django.db import transaction

from gloveapp.agents.config import get_agent_spec
from gloveapp.conversations.models import Session
from gloveapp.conversations.services import session_create
from gloveapp.demo.shop import catalogue_ensure

DEMO_USERNAME = "demo"
STAFF_USERNAME = "staff"
# Development defaults, printed by the command; set DEMO_PASSWORD / STAFF_PASSWORD elsewhere.
DEFAULT_DEMO_PASSWORD = "demo-coffee"
DEFAULT_STAFF_PASSWORD = "staff-coffee"
# The shop's approvers (docs/howto/approvals.md): a barista decides large orders, a manager
# once they are escalated. Staff, not superusers: they see /approvals/, not everything.
BARISTA_USERNAME, BARISTAS = "barista", "baristas"
MANAGER_USERNAME, MANAGERS = "manager", "managers"
DEFAULT_BARISTA_PASSWORD = "barista-coffee"
DEFAULT_MANAGER_PASSWORD = "manager-coffee"


@dataclass(frozen=True, slots=True)
class DemoAccount:
    username: str
    password: str | None  # None: the account existed and kept its password
    created: bool


@dataclass(frozen=True, slots=True)
class DemoSetup:
    demo: DemoAccount
    staff: DemoAccount
    barista: DemoAccount
    manager: DemoAccount
    session_id: str  # as the demo user's pages name it (their key)
    session_created: bool


def _account(
    username: str,
    password: str | None,
    default: str,
    *,
    staff: bool,
    superuser: bool = True,
    group: str | None = None,
) -> DemoAccount:
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    if created or password:
        user.set_password(password or default)
    if staff:
        user.is_staff = True
        user.is_superuser = superuser
    user.save()
    if group is not None:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    if created or password:
        shown: str | None = password or default
    else:
        # An account that still has the development default: say so, every start.
        shown = default if user.check_password(default) else None
    return DemoAccount(username=username, password=shown, created=created)


@dataclass(frozen=True, slots=True)
class DemoLogin:
    username: str
    password: str
    staff: bool


def demo_logins() -> list[DemoLogin]:
    """The demo accounts that still have their development passwords, for the login page."""
    User = get_user_model()
    found = []
    for username, password, staff in (
        (DEMO_USERNAME, DEFAULT_DEMO_PASSWORD, False),
        (STAFF_USERNAME, DEFAULT_STAFF_PASSWORD, True),
        (BARISTA_USERNAME, DEFAULT_BARISTA_PASSWORD, True),
        (MANAGER_USERNAME, DEFAULT_MANAGER_PASSWORD, True),
    ):
        encoded = (
            User.objects.filter(username=username, is_active=True)
            .values_list("password", flat=True)
            .first()
        )
        if encoded is not None and _is_password(encoded, password):
            found.append(DemoLogin(username=username, password=password, staff=staff))
    return found


@functools.lru_cache(maxsize=64)
def _is_password(encoded: str, password: str) -> bool:
    # A password check is deliberately slow (PBKDF2, about a second on a busy machine) and
    # the login page asks about four accounts on every view: ask once per stored hash. A
    # changed password is a new hash, so the answer never goes stale.
    return check_password(password, encoded)


def demo_setup(
    *,
    demo_password: str | None = None,
    staff_password: str | None = None,
    barista_password: str | None = None,
    manager_password: str | None = None,
) -> DemoSetup:
    agent_name = settings.GLOVE_DEFAULT_AGENT
    spec = get_agent_spec(agent_name)  # fails early, and clearly, on a misconfigured agent
    with transaction.atomic():
        demo = _account(DEMO_USERNAME, demo_password, DEFAULT_DEMO_PASSWORD, staff=False)
        staff = _account(STAFF_USERNAME, staff_password, DEFAULT_STAFF_PASSWORD, staff=True)
        barista = _account(
            BARISTA_USERNAME,
            barista_password,
            DEFAULT_BARISTA_PASSWORD,
            staff=True,
            superuser=False,
            group=BARISTAS,
        )
        manager = _account(
            MANAGER_USERNAME,
            manager_password,
            DEFAULT_MANAGER_PASSWORD,
            staff=True,
            superuser=False,
            group=MANAGERS,
        )
        catalogue_ensure()
        session = (
            Session.objects.filter(owner__username=DEMO_USERNAME).order_by("created_at").first()
        )
        session_created = session is None
        if session is None:
            session = session_create(
                owner=get_user_model().objects.get(username=DEMO_USERNAME),
                agent_name=spec.name,
                title=spec.title,
            )
    return DemoSetup(
        demo=demo,
        staff=staff,
        barista=barista,
        manager=manager,
        session_id=session.key,
        session_created=session_created,
    )
