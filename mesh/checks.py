"""System checks for the `MESH` setting (ids mesh.E0xx)."""

from __future__ import annotations

from django.core.checks import Error, Warning, register

from mesh.layers import DEFAULT_ALIAS, InvalidMeshConfig, build_transport, mesh_config


@register()
def check_mesh_setting(app_configs, **kwargs):
    config = mesh_config()
    if not isinstance(config, dict) or DEFAULT_ALIAS not in config:
        return [
            Error(
                "MESH must be a dict with a 'default' transport.",
                hint='MESH = {"default": {"BACKEND": "mesh.transports.inprocess.InProcessMeshTransport"}}',
                id="mesh.E001",
            )
        ]
    errors = []
    for alias, entry in config.items():
        try:
            # Building a transport connects to nothing: clients are made on first use.
            build_transport(entry, alias)
        except InvalidMeshConfig as error:
            errors.append(Error(str(error), hint="See docs/reference/mesh.md.", id="mesh.E002"))
    return errors


@register()
def check_a2a_peers_setting(app_configs, **kwargs):
    from mesh.a2a_peers import missing_tokens, setting_problems

    hint = "See docs/reference/mesh.md#external-a2a-agents."
    errors = [Error(problem, hint=hint, id="mesh.E003") for problem in setting_problems()]
    return errors + [Warning(problem, hint=hint, id="mesh.W001") for problem in missing_tokens()]
