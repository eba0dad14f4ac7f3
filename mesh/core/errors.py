"""The mesh's errors (contract §9.1): each a `MeshError` with a stable `code`."""

from __future__ import annotations


class MeshError(Exception):
    code = "mesh_error"


class MeshNotRegisteredError(MeshError):
    """Kept for parity with glove-mesh, which defines it; nothing raises it there either."""

    code = "not_registered"

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f'Agent "{agent_id}" is not registered on the mesh.')


class MeshUnknownAgentError(MeshError):
    code = "unknown_agent"

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f'No agent with id "{agent_id}".')


class MeshUnknownMessageError(MeshError):
    code = "unknown_message"

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        super().__init__(f'No record of message "{message_id}".')


class MeshStoreUnsupportedError(MeshError):
    code = "store_unsupported"

    def __init__(self) -> None:
        super().__init__(
            "The provided StoreAdapter does not implement inbox methods; glove-mesh requires "
            "getInboxItems/addInboxItem/updateInboxItem/ getResolvedInboxItems."
        )


class MeshAccessDeniedError(MeshError):
    """An access rule forbids this sender to message this recipient (our addition)."""

    code = "access_denied"

    def __init__(self, sender: str, recipient: str) -> None:
        self.sender = sender
        self.recipient = recipient
        super().__init__(f'Agent "{sender}" may not message "{recipient}".')
