"""JSON parsing for the API that answers every malformed body with a 400."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class SafeJSONParser(JSONParser):
    """DRF's JSONParser, plus a 400 for JSON nested too deeply to decode.

    Python's json module raises RecursionError (not ValueError) on a body like "[[[[...",
    which DRF's parser lets through as a 500 (pinned by tests/api/test_drf_exceptions.py).
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - the body is nested too deeply.") from exc
