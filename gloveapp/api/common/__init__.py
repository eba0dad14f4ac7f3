"""What every audience of the API shares: access, authentication, errors, serializers' fields,
parsing, rendering, the `Idempotency-Key` header and `/metrics`. It imports no audience."""
