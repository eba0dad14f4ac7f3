"""What the apps share and no app owns: the database helpers, paging, the HTTP edge,
the scale admin, logs, wake-ups and the Django side of telemetry. It imports no app."""
