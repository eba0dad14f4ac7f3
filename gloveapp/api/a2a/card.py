"""An agent's A2A card: who it is, where it answers (both bindings), what it can do (a skill
per tool), and how a caller proves who it is (the API token, as `Token <key>` or a bearer)."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from gloveapp.agents.config import AgentSpec

JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
PROTOCOL_VERSION = "1.0"
# The security schemes the card names: the same API token (`create_api_token`) either way.
API_TOKEN_SCHEME = "apiToken"
BEARER_SCHEME = "bearer"


def agent_base(origin: str, agent: str) -> str:
    """Where the agent's endpoints hang: `<origin>/a2a/<agent>`."""
    return f"{origin}/a2a/{agent}"


def agent_card(spec: AgentSpec, *, origin: str, version: str) -> AgentCard:
    base = agent_base(origin, spec.name)
    skills = [
        AgentSkill(
            id=tool.name,
            name=tool.name.replace("_", " "),
            description=tool.description or tool.name,
            tags=[spec.name],
            input_modes=["text/plain", "application/json"],
            output_modes=["text/plain", "application/json"],
        )
        for tool in spec.tools
    ]
    if not skills:  # an agent without tools still converses
        skills = [
            AgentSkill(
                id="conversation", name="conversation", description=spec.title, tags=[spec.name]
            )
        ]
    return AgentCard(
        name=spec.title or spec.name,
        description=(spec.title or spec.name)
        + ". Each message is a turn of the conversation its contextId names.",
        version=version,
        provider=AgentProvider(organization="glove-django", url=origin),
        supported_interfaces=[
            AgentInterface(
                url=f"{base}/jsonrpc", protocol_binding=JSONRPC, protocol_version=PROTOCOL_VERSION
            ),
            AgentInterface(
                url=f"{base}/rest", protocol_binding=HTTP_JSON, protocol_version=PROTOCOL_VERSION
            ),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
        security_schemes={
            API_TOKEN_SCHEME: SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header",
                    name="Authorization",
                    description="The API token (`manage.py create_api_token`) as `Token <key>`.",
                )
            ),
            BEARER_SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer", description="The same API token as a bearer token."
                )
            ),
        },
        # Either one will do.
        security_requirements=[
            SecurityRequirement(schemes={BEARER_SCHEME: StringList()}),
            SecurityRequirement(schemes={API_TOKEN_SCHEME: StringList()}),
        ],
    )
