"""Configured agents: the registry read from `GLOVE_AGENTS`, the coffee-shop agent and the
offline demo model that stands in when no model API key is configured."""
