"""The `MESH` setting and its loader, shaped like Channels' `CHANNEL_LAYERS`:

    MESH = {
        "default": {
            "BACKEND": "mesh.transports.redis_pubsub.RedisMeshTransport",
            "CONFIG": {"url": "redis://127.0.0.1:6379/0", "signing_keys": {...}, "access": {...}},
        }
    }

`get_mesh_transport(alias)` builds the transport once per process and alias (the in-process
network must be shared by every agent of the process); `transport.adapter(agent_id)` gives an
agent its `MeshAdapter`. Misconfiguration is reported by the system checks in `mesh.checks`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

DEFAULT_ALIAS = "default"
DEFAULT_BACKEND = "mesh.transports.inprocess.InProcessMeshTransport"
DEFAULT_MESH = {DEFAULT_ALIAS: {"BACKEND": DEFAULT_BACKEND}}


class InvalidMeshConfig(ValueError):
    pass


def mesh_config() -> dict[str, Any]:
    configured = getattr(settings, "MESH", None)
    return DEFAULT_MESH if configured is None else configured


def build_transport(entry: Any, alias: str = DEFAULT_ALIAS) -> Any:
    """Build one transport from a setting entry; raises `InvalidMeshConfig` naming the key."""
    if not isinstance(entry, dict):
        raise InvalidMeshConfig(f"MESH[{alias!r}] must be a dict with a BACKEND.")
    backend = entry.get("BACKEND")
    if not isinstance(backend, str) or not backend:
        raise InvalidMeshConfig(f"MESH[{alias!r}]['BACKEND'] must be a dotted path.")
    config = entry.get("CONFIG", {})
    if not isinstance(config, dict):
        raise InvalidMeshConfig(f"MESH[{alias!r}]['CONFIG'] must be a dict.")
    try:
        transport_class = import_string(backend)
    except ImportError as error:
        raise InvalidMeshConfig(
            f"MESH[{alias!r}]['BACKEND'] cannot be imported: {error}"
        ) from error
    try:
        transport = transport_class(**config)
    except (TypeError, ValueError) as error:
        raise InvalidMeshConfig(f"MESH[{alias!r}]['CONFIG'] is not accepted: {error}") from error
    guard = getattr(transport, "guard", None)
    if guard is not None and getattr(guard, "on_refuse", False) is None:
        from mesh import refusals

        # Refused frames are counted in the database, for `manage.py mesh_refusals`.
        guard.on_refuse = refusals.record
    return transport


class MeshTransportManager:
    def __init__(self) -> None:
        self._transports: dict[str, Any] = {}

    def __getitem__(self, alias: str) -> Any:
        if alias not in self._transports:
            config = mesh_config()
            if alias not in config:
                raise InvalidMeshConfig(f"No mesh transport called {alias!r} in MESH.")
            self._transports[alias] = build_transport(config[alias], alias)
        return self._transports[alias]

    def reset(self) -> None:
        """Forget built transports (tests that change the MESH setting call this)."""
        self._transports.clear()


mesh_transports = MeshTransportManager()


def get_mesh_transport(alias: str = DEFAULT_ALIAS) -> Any:
    return mesh_transports[alias]
