"""Settings of the cross-process mesh tests' `run_agent b` and `turn_worker` processes."""

from gloveapp.core.providers.registry import register_model_provider
from gloveapp.settings import *  # noqa: F403

GLOVE_AGENTS = {**GLOVE_AGENTS, "b": "tests.mesh.peer_agent.build_agent"}  # noqa: F405
GLOVE_MODEL = "mesh-peer-b"


def _b_model(model: str = "", **kwargs):
    from tests.mesh.peer_agent import b_model

    return b_model()


# Registered here, before the system checks look at GLOVE_MODEL.
register_model_provider("mesh-peer-b", _b_model, replace=True)
