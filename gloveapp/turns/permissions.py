"""The permission vocabulary: what a permission prompt offers, what each answer tells the
executor, and how a remembered decision is named on the page."""

from __future__ import annotations

from typing import Any

from gloveapp.core.executor import PERMISSION_DENY_ONCE, PERMISSION_ONCE

# The permission vocabulary, in one place: what a prompt offers (value, button label), what
# each answer tells the executor, and how a remembered decision is named on the page.
# "once" and "deny_once" are not remembered; "always" and "always_deny" are stored for the
# chat (and shown, with a reset, beside it). "deny" and the booleans are Glove's answers:
# a denial Glove stores, so a plain "deny" keeps meaning "always deny" for API callers.
PERMISSION_CHOICES: tuple[tuple[str, str], ...] = (
    ("once", "Allow once"),
    ("always", "Always allow"),
    ("deny_once", "Deny once"),
    ("always_deny", "Always deny"),
)
PERMISSION_ANSWERS: dict[Any, Any] = {
    "once": PERMISSION_ONCE,
    "always": True,
    "allow": True,
    "deny_once": PERMISSION_DENY_ONCE,
    # The approvals vocabulary (gloveapp.core.approvals): approve = once, reject = deny once
    # (`{"decision": "reject", "reason": ...}` carries a reason the agent reads).
    "approve": PERMISSION_ONCE,
    "reject": PERMISSION_DENY_ONCE,
    "always_deny": False,
    "deny": False,
    True: True,
    False: False,
}
# The words a permission prompt takes as its answer (the REST route's choices).
PERMISSION_ANSWER_WORDS: tuple[str, ...] = tuple(
    answer for answer in PERMISSION_ANSWERS if isinstance(answer, str)
)
REMEMBERED_PERMISSION_LABELS = {"granted": "Always allowed", "denied": "Always denied"}
