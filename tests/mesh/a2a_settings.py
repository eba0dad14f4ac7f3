"""Settings of the processes of the mesh's A2A tests: `run_a2a_peers x` (agent x by its
card) and, for the end-to-end test, `run_agent g` and its `turn_worker` (tests.mesh.a2a_glove_agent)."""

import os

from gloveapp.core.providers.registry import register_model_provider
from gloveapp.settings import *  # noqa: F403

MESH_A2A_PEERS = {
    "x": {
        "card_url": os.environ.get("X_CARD_URL", "http://127.0.0.1:9/.well-known/agent-card.json"),
        "token_env": "X_PEER_TOKEN",
        "timeout_seconds": 60,
    }
}
GLOVE_AGENTS = {**GLOVE_AGENTS, "g": "tests.mesh.a2a_glove_agent.build_agent"}  # noqa: F405
GLOVE_MODEL = "mesh-a2a-g"


def _g_model(model: str = "", **kwargs):
    from tests.mesh.a2a_glove_agent import g_model

    return g_model()


register_model_provider("mesh-a2a-g", _g_model, replace=True)
