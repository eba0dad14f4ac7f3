"""Signed messages and access rules, enforced by every transport (both off by default).

Signing: with a secret per agent (`signing_keys={"planner": "...", "worker": "..."}`) a sender
signs each message it puts on the wire with HMAC-SHA256 over the canonical JSON of every field
except `signature`, keyed by its own secret; a receiver recomputes it with the key of the
*claimed* `from`. A message without a valid signature, or from an agent with no key, is
dropped, logged and counted (`MeshGuard.rejected`). Because the key belongs to the claimed
sender, a forged `from` fails verification too.

Access rules: `access={"shop": ["roaster"], "roaster": ["*"]}` says who may message whom
(direct messages, broadcasts and acks alike; an ack is a message from the acker to the original
sender). Agents not named are unrestricted; `"*"` as a key sets the default for them. Senders
are refused with `MeshAccessDeniedError`; receivers also drop what the rules forbid, so a peer
that ignores the rules (say a TypeScript agent on the same Redis) cannot get around them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

logger = logging.getLogger("mesh")

SIGNATURE_PREFIX = "hmac-sha256:"


def canonical_bytes(wire: Mapping[str, Any]) -> bytes:
    unsigned = {key: value for key, value in wire.items() if key != "signature"}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class MeshGuard:
    def __init__(
        self,
        *,
        signing_keys: Mapping[str, str] | None = None,
        access: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        signing_keys = signing_keys or {}
        access = access or {}
        if not isinstance(signing_keys, Mapping) or not all(
            isinstance(agent, str) and isinstance(key, str) and key
            for agent, key in signing_keys.items()
        ):
            raise ValueError("signing_keys must map agent ids to non-empty secret strings")
        if not isinstance(access, Mapping) or not all(
            isinstance(sender, str)
            and not isinstance(targets, str)
            and isinstance(targets, Iterable)
            for sender, targets in access.items()
        ):
            raise ValueError("access must map agent ids to lists of agent ids")
        self._keys = {agent: key.encode() for agent, key in signing_keys.items()}
        self._access = {sender: frozenset(map(str, targets)) for sender, targets in access.items()}
        self.rejected: Counter[str] = Counter()

    @property
    def signing(self) -> bool:
        return bool(self._keys)

    @property
    def restricted(self) -> bool:
        return bool(self._access)

    # -- access --------------------------------------------------------------------------
    def may_message(self, sender: str, recipient: str) -> bool:
        if not self._access:
            return True
        allowed = self._access.get(sender, self._access.get("*"))
        if allowed is None:
            return True
        return "*" in allowed or recipient in allowed

    # -- signing -------------------------------------------------------------------------
    def sign(self, wire: dict[str, Any]) -> dict[str, Any]:
        """Add `signature` when signing is on; raises `ValueError` if the sender has no key."""
        if not self._keys:
            return wire
        key = self._keys.get(wire["from"])
        if key is None:
            raise ValueError(f'No signing key is configured for agent "{wire["from"]}".')
        digest = hmac.new(key, canonical_bytes(wire), hashlib.sha256).hexdigest()
        wire["signature"] = SIGNATURE_PREFIX + digest
        return wire

    def admit(self, wire: Mapping[str, Any], recipient: str) -> bool:
        """Whether `recipient` should accept this wire message; counts and logs refusals."""
        sender = str(wire.get("from", ""))
        if self._keys:
            reason = self._signature_problem(wire, sender)
            if reason is not None:
                return self._refuse(reason, wire, recipient)
        if not self.may_message(sender, recipient):
            return self._refuse("access_denied", wire, recipient)
        return True

    def _signature_problem(self, wire: Mapping[str, Any], sender: str) -> str | None:
        key = self._keys.get(sender)
        if key is None:
            return "unknown_signer"
        signature = wire.get("signature")
        if not isinstance(signature, str) or not signature.startswith(SIGNATURE_PREFIX):
            return "unsigned"
        expected = hmac.new(key, canonical_bytes(wire), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature[len(SIGNATURE_PREFIX) :]):
            return "bad_signature"
        return None

    def _refuse(self, reason: str, wire: Mapping[str, Any], recipient: str) -> bool:
        self.rejected[reason] += 1
        logger.warning(
            "[glove-mesh] dropped message %s claiming to be from %r for %r: %s",
            wire.get("id"),
            wire.get("from"),
            recipient,
            reason,
        )
        return False


OPEN_GUARD = MeshGuard()
