"""A receiver of our signed webhooks, as a service that takes them would be written: it
checks the timestamp and the signature (`gloveapp.lib.webhook_signing`), refuses a signature
it has seen (a replay: 409), and counts each `deliveryId` once."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gloveapp.lib import webhook_signing

MAX_SKEW = 300


class Receiver:
    def __init__(self, secret: str, *, failures: int = 0) -> None:
        self.secret = secret
        self.failures = failures  # answer 500 to this many first deliveries
        self.deliveries: list[dict] = []  # every accepted request's body
        self.requests: list[tuple[dict, bytes]] = []  # every request as it came
        self.refused: list[str] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver.take(dict(self.headers.items()), body)
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def take(self, headers: dict, body: bytes) -> int:
        with self._lock:
            self.requests.append((headers, body))
            signature = headers.get(webhook_signing.SIGNATURE_HEADER, "")
            problem = webhook_signing.signature_problem(
                secret=self.secret,
                timestamp=headers.get(webhook_signing.TIMESTAMP_HEADER, ""),
                signature=signature,
                body=body,
                now=time.time(),
                max_skew=MAX_SKEW,
            )
            digest = webhook_signing.signature_digest(signature)
            if not problem and digest in self._seen:
                problem = "replayed"
            if problem:
                self.refused.append(problem)
                return 409 if problem == "replayed" else 401
            self._seen.add(digest)
            if self.failures > 0:
                self.failures -= 1
                return 500
            self.deliveries.append(json.loads(body))
            return 204

    def counted(self) -> dict[str, int]:
        """How many accepted deliveries each `deliveryId` had (an A2A push names it in its
        task's metadata)."""
        counts: dict[str, int] = {}
        for body in self.deliveries:
            key = body.get("deliveryId") or body["task"]["metadata"]["deliveryId"]
            counts[key] = counts.get(key, 0) + 1
        return counts

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
