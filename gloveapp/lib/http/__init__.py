"""The HTTP edge: middleware, the health probe, and unread request bodies."""
