"""The server's agents over A2A v1.0 (JSON-RPC and HTTP+JSON), on the official `a2a-sdk`."""
