"""The headless agent API: the server's agents from any client (start a turn, its slots and
permission prompts, Stop, the session's events as SSE)."""
