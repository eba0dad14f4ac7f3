"""The MESH setting: the loader builds the configured transport; bad config fails the checks."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from mesh.checks import check_mesh_setting
from mesh.layers import InvalidMeshConfig, get_mesh_transport, mesh_transports
from mesh.transports.inprocess import InProcessMeshTransport
from mesh.transports.redis_pubsub import RedisMeshTransport


@pytest.fixture(autouse=True)
def _fresh_transports():
    mesh_transports.reset()
    yield
    mesh_transports.reset()


def test_it_defaults_to_one_in_process_network_per_process(settings):
    del settings.MESH
    first = get_mesh_transport()
    assert isinstance(first, InProcessMeshTransport)
    assert get_mesh_transport() is first
    assert check_mesh_setting(None) == []


def test_it_builds_the_redis_transport_from_its_config(settings):
    settings.MESH = {
        "default": {
            "BACKEND": "mesh.transports.redis_pubsub.RedisMeshTransport",
            "CONFIG": {
                "url": "redis://127.0.0.1:6379/13",
                "sender_ttl": 60,
                "signing_keys": {"a": "k"},
            },
        }
    }
    transport = get_mesh_transport()
    assert isinstance(transport, RedisMeshTransport)
    assert (transport.url, transport.sender_ttl, transport.guard.signing) == (
        "redis://127.0.0.1:6379/13",
        60,
        True,
    )
    assert check_mesh_setting(None) == []


@pytest.mark.parametrize(
    ("mesh", "expected"),
    [
        ({}, "mesh.E001"),
        ({"default": "redis"}, "mesh.E002"),
        ({"default": {"BACKEND": "mesh.nowhere.Transport"}}, "mesh.E002"),
        (
            {
                "default": {
                    "BACKEND": "mesh.transports.inprocess.InProcessMeshTransport",
                    "CONFIG": {"hosts": []},
                }
            },
            "mesh.E002",
        ),
        (
            {
                "default": {
                    "BACKEND": "mesh.transports.redis_pubsub.RedisMeshTransport",
                    "CONFIG": {"url": "http://x"},
                }
            },
            "mesh.E002",
        ),
        (
            {
                "default": {
                    "BACKEND": "mesh.transports.inprocess.InProcessMeshTransport",
                    "CONFIG": {"access": {"a": "b"}},
                }
            },
            "mesh.E002",
        ),
    ],
)
def test_a_bad_mesh_setting_is_a_system_check_error(settings, db, mesh, expected):
    settings.MESH = mesh
    [error] = check_mesh_setting(None)
    assert error.id == expected
    with pytest.raises(SystemCheckError, match=expected):
        call_command("check")


def test_asking_for_an_unknown_alias_names_it(settings):
    settings.MESH = {"default": {"BACKEND": "mesh.transports.inprocess.InProcessMeshTransport"}}
    with pytest.raises(InvalidMeshConfig, match="'other'"):
        get_mesh_transport("other")


def test_the_environment_chooses_the_transport_and_signing_keys():
    from gloveapp.settings import mesh_for

    mesh = mesh_for("redis", "redis://h:1/2", {"a": "s"})
    assert mesh["default"]["BACKEND"] == "mesh.transports.redis_pubsub.RedisMeshTransport"
    assert mesh["default"]["CONFIG"] == {
        "url": "redis://h:1/2",
        "signing_keys": {"a": "s"},
        "max_age": 300,
    }
    database = mesh_for("database", "", {})["default"]
    assert database["BACKEND"] == "mesh.transports.database.DatabaseMeshTransport"
    with pytest.raises(ValueError, match="MESH_TRANSPORT"):
        mesh_for("carrier-pigeon", "", {})
