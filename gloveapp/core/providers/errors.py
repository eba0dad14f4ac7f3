"""Errors raised by model adapters.

Adapters translate each SDK's exception zoo into one type so the agent loop and the web layer can
report a failed model call without knowing which provider was behind it.
"""

from __future__ import annotations

from typing import Any


class ModelProviderError(Exception):
    """A model provider refused or failed a request.

    `status` is the HTTP status (None for connection failures and timeouts); `error_type` is the
    provider's error category (`rate_limit_error`, `invalid_request_error`, ...) when it sent one;
    `body` is the decoded error body for logging.
    """

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        body: Any = None,
    ) -> None:
        self.provider = provider
        self.message = message
        self.status = status
        self.error_type = error_type
        self.body = body
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"{self.provider} API error"
        if self.status is not None:
            where += f" {self.status}"
        if self.error_type:
            where += f" ({self.error_type})"
        return f"{where}: {self.message}"

    @property
    def retryable(self) -> bool:
        """Whether retrying later may succeed: rate limits, overload, server errors, no connection."""
        if self.status is None:
            return True
        return self.status in (408, 409, 429) or self.status >= 500


class ModelConfigurationError(ValueError):
    """An adapter cannot be built: unknown provider, missing API key, bad model spec."""
