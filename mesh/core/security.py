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

Admission (`MeshGuard.admit`), on every frame a recipient reads off the wire, in this order:
1. signed (signing on): the signature verifies with the claimed sender's key, and the signed
   `created_at` lies within `max_age` seconds of the receiver's clock, either way (setting
   `MESH_MAX_AGE_SECONDS`, default 300): a captured frame cannot be replayed later;
2. addressed: a direct message or an ack is admitted only by the agent named in its `to` (a
   frame for "worker" re-published on "auditor"'s channel is refused);
3. allowed: the access rules permit (from, recipient);
4. new: the recipient has not admitted this message id before. The memory is per recipient and
   bounded: `seen_capacity` ids, and with signing on, an id is forgotten once its frame is older
   than `max_age` (the timestamp check refuses it from then on). The database transport keeps
   its memory in the database (a unique row per delivered id), so it survives a restart.

Every refusal is logged, counted by reason in `MeshGuard.rejected`, and handed to `on_refuse`
(the Django side records it for `manage.py mesh_refusals` and the admin).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

logger = logging.getLogger("mesh")

SIGNATURE_PREFIX = "hmac-sha256:"
DEFAULT_MAX_AGE = 300.0
DEFAULT_SEEN_CAPACITY = 65536
# The reasons a frame is refused, as counted.
REFUSAL_REASONS = (
    "unknown_signer",
    "unsigned",
    "bad_signature",
    "stale",
    "wrong_recipient",
    "access_denied",
    "replay",
)


def frame_time(value: Any) -> float | None:
    """Seconds since the epoch of a frame's `created_at` (ISO 8601), or None if unreadable."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp()


def canonical_bytes(wire: Mapping[str, Any]) -> bytes:
    unsigned = {key: value for key, value in wire.items() if key != "signature"}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class MeshGuard:
    def __init__(
        self,
        *,
        signing_keys: Mapping[str, str] | None = None,
        access: Mapping[str, Iterable[str]] | None = None,
        max_age: float = DEFAULT_MAX_AGE,
        seen_capacity: int = DEFAULT_SEEN_CAPACITY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        signing_keys = signing_keys or {}
        if not isinstance(max_age, int | float) or isinstance(max_age, bool) or max_age <= 0:
            raise ValueError("max_age must be a positive number of seconds")
        if not isinstance(seen_capacity, int) or seen_capacity <= 0:
            raise ValueError("seen_capacity must be a positive number of ids")
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
        self.max_age = float(max_age)
        self.seen_capacity = seen_capacity
        self.clock = clock
        # (recipient, message id) -> the frame's time (or when admitted, unsigned), oldest first.
        self._seen: OrderedDict[tuple[str, str], float] = OrderedDict()
        # Called with each refusal's reason (the Django side persists the counts).
        self.on_refuse: Callable[[str], None] | None = None

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
        """Whether `recipient` should accept this wire message (see the module's docstring);
        counts and logs refusals. Admitting remembers the id: call it once per delivery."""
        sender = str(wire.get("from", ""))
        now = self.clock()
        stamp = None
        if self._keys:
            reason = self._signature_problem(wire, sender)
            if reason is None:
                stamp = frame_time(wire.get("created_at"))
                if stamp is None or abs(now - stamp) > self.max_age:
                    reason = "stale"
            if reason is not None:
                return self._refuse(reason, wire, recipient)
        if wire.get("kind", "direct") != "broadcast" and wire.get("to") != recipient:
            return self._refuse("wrong_recipient", wire, recipient)
        if not self.may_message(sender, recipient):
            return self._refuse("access_denied", wire, recipient)
        if not self._remember(recipient, str(wire.get("id", "")), stamp or now, now):
            return self._refuse("replay", wire, recipient)
        return True

    def _remember(self, recipient: str, message_id: str, stamp: float, now: float) -> bool:
        """Record an admitted id; False if this recipient admitted it before."""
        key = (recipient, message_id)
        if key in self._seen:
            return False
        self._seen[key] = stamp
        if self._keys:
            # Signed frames older than the window are refused by their timestamp anyway.
            # (Ids arrive roughly in time order; an out-of-order one goes by capacity.)
            horizon = now - self.max_age
            while self._seen:
                oldest = next(iter(self._seen.values()))
                if oldest >= horizon:
                    break
                self._seen.popitem(last=False)
        while len(self._seen) > self.seen_capacity:
            self._seen.popitem(last=False)
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
        if self.on_refuse is not None:
            try:
                self.on_refuse(reason)
            except Exception:
                logger.exception("[glove-mesh] recording a refusal failed:")
        logger.warning(
            "[glove-mesh] dropped message %s claiming to be from %r for %r: %s",
            wire.get("id"),
            wire.get("from"),
            recipient,
            reason,
        )
        return False


OPEN_GUARD = MeshGuard()
