"""`store_factory`: one fixture, one param per StoreAdapter implementation.

A factory takes an optional session identifier and returns a fresh store. To run the
contract over another implementation, write its factory and add one line to STORE_KINDS.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections

from gloveapp.core.store import MemoryStore
from tests.api.liveserver import make_staff, remote_store_factory

StoreFactory = Callable[..., Any]
_numbers = count(1)


def _session_id() -> str:
    return f"contract_{next(_numbers)}"


def memory_factory(request: pytest.FixtureRequest) -> StoreFactory:
    return lambda identifier=None: MemoryStore(identifier or _session_id())


def django_factory(request: pytest.FixtureRequest) -> StoreFactory:
    from gloveapp.ormstore.store import DjangoStore

    # The store runs the ORM in asgiref's thread-sensitive executor thread, on that thread's
    # own connection: the data must be committed to be seen (hence the transactional
    # django_db mark below), and that connection closed before the test database is dropped.
    request.addfinalizer(
        lambda: SyncToAsync.single_thread_executor.submit(connections.close_all).result()
    )
    return lambda identifier=None: DjangoStore(identifier or _session_id())


STORE_KINDS = [
    pytest.param(memory_factory, id="memory"),
    pytest.param(
        django_factory,
        id="django",
        marks=[pytest.mark.postgres, pytest.mark.django_db(transaction=True)],
    ),
    # RemoteStore over HTTP against a Daphne subprocess (tests/api/liveserver.py).
    pytest.param(
        remote_store_factory, id="remote", marks=[pytest.mark.postgres, pytest.mark.process]
    ),
]


@pytest.fixture(params=STORE_KINDS)
def store_factory(request: pytest.FixtureRequest) -> StoreFactory:
    return request.param(request)


@pytest.fixture
def store(store_factory: StoreFactory) -> Any:
    return store_factory()


@pytest.fixture(scope="session")
def live_token(live_server_process) -> str:
    """The contract's RemoteStore speaks as a staff user (a service account): resolving
    through `update_inbox_item` is part of the contract, and over REST it is staff's only
    (a session's plain owner gets a 403, tests/api/test_inbox_authority.py)."""
    token = live_server_process.token_for("contract-staff")
    make_staff(live_server_process.database_url, "contract-staff")
    return token
