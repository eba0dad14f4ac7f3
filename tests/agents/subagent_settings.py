"""Settings of the subagent restart test's server and turn workers."""

from gloveapp.settings import *  # noqa: F403
from tests.agents.subagent_agents import agents, register_models

GLOVE_AGENTS = {**GLOVE_AGENTS, **agents()}  # noqa: F405
# Registered here, before the system checks look at the agents' models.
register_models()
