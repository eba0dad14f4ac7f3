"""The workspace inbox's REST routes (DRF). An edge: checks who asks, calls a selector or a
service, answers. Everything is scoped to the entry's owner; anyone else gets the 404 that an
id which does not exist gets, so ids do not leak.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import re
import unicodedata
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from gloveapp.api.common.access import ApiView
from inbox.workspaces import paths, selectors, services
from inbox.workspaces.render import download_max_bytes

CHUNK = 64 * 1024
# Served inline (the page shows them in <img>); anything else is a download, so a workspace
# file can never run as a page on this origin (an .html or .svg would).
INLINE_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif"}
# Types a browser would render as a document (markup, scripts): sent as bytes, whatever the
# name says, so even a browser that ignored the disposition would show nothing.
_DOCUMENT_TYPES = re.compile(r"html|xml|svg|javascript|ecmascript", re.I)
_ASCII_FALLBACK_UNSAFE = re.compile(r"[^A-Za-z0-9 !#$&+,.;=@^_`{}~()\[\]-]")


def content_disposition(name: str, *, inline: bool = False) -> str:
    """RFC 6266 for any name: an ASCII `filename=` for old clients and `filename*=UTF-8''`
    with the exact name, percent-encoded (Django's RFC 2047 form for a non-ASCII
    name was ignored by Chromium, which then rendered `ﬁ.html` inline)."""
    # NFKD turns "ﬁ" into "fi" and "é" into "e" + a combining accent (dropped below).
    decomposed = "".join(
        char for char in unicodedata.normalize("NFKD", name) if not unicodedata.combining(char)
    )
    fallback = _ASCII_FALLBACK_UNSAFE.sub("_", decomposed).strip(" ")
    if fallback.strip(".") == "":
        fallback = "download"
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


ErrorSerializer = inline_serializer(
    "WorkspaceInboxError",
    {"error": serializers.CharField(), "field": serializers.CharField(required=False)},
)


class DocSerializer(serializers.Serializer):
    path = serializers.CharField()


class EntrySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    ts = serializers.IntegerField(help_text="Epoch milliseconds.")
    workspaceId = serializers.CharField()
    workspaceLabel = serializers.CharField(required=False)
    docs = DocSerializer(many=True, required=False)
    comments = serializers.CharField(required=False)
    readAt = serializers.DateTimeField(allow_null=True)


HistorySerializer = inline_serializer(
    "WorkspaceInboxHistory",
    {"entries": EntrySerializer(many=True), "hasMore": serializers.BooleanField()},
)


def _error(status_code: int, error: str, **extra: Any) -> Response:
    return Response({"error": error, **extra}, status=status_code)


def _not_found() -> Response:
    return _error(404, "not_found")


def entry_payload(entry: Any, read_at: Any) -> dict:
    return services.entry_wire(entry, read_at=read_at, with_read=True)


class InboxHistoryApi(ApiView):
    @extend_schema(
        operation_id="workspace_inbox_history",
        parameters=[
            OpenApiParameter("limit", int, description="1-200, default 100."),
            OpenApiParameter("before", str, description="An entry id: entries older than it."),
            OpenApiParameter("workspaceId", str, description="Only this workspace's entries."),
        ],
        responses={200: HistorySerializer, 400: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        try:
            page = selectors.history(
                user=request.user,
                limit=request.query_params.get("limit"),
                before=request.query_params.get("before"),
                workspace_id=request.query_params.get("workspaceId"),
            )
        except selectors.BadParameter as exc:
            return _error(400, f"{exc.name}: {exc}", field=exc.name)
        entries = [entry_payload(e, page.read_at.get(e.pk)) for e in page.entries]
        return Response({"entries": entries, "hasMore": page.has_more})


class InboxSeedApi(ApiView):
    """Dev only (DEBUG): append an entry without running an agent."""

    @extend_schema(
        operation_id="workspace_inbox_seed",
        request=inline_serializer(
            "WorkspaceInboxSeed",
            {
                "workspaceId": serializers.CharField(),
                "docs": DocSerializer(many=True, required=False),
                "comments": serializers.CharField(required=False),
            },
        ),
        responses={
            200: inline_serializer("WorkspaceInboxSeeded", {"entry": EntrySerializer()}),
            400: ErrorSerializer,
            404: ErrorSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        if not settings.DEBUG:
            return _not_found()
        body = request.data
        if not isinstance(body, dict):
            return _error(400, "invalid json")
        workspace = selectors.owned_workspace(request.user, body.get("workspaceId"))
        if workspace is None:
            return _error(400, "workspaceId: no such workspace", field="workspaceId")
        try:
            entry = services.entry_push(
                workspace=workspace, docs=body.get("docs"), comments=body.get("comments")
            )
        except services.EntryInvalid as exc:
            return _error(400, str(exc), field=exc.field)
        return Response({"entry": entry_payload(entry, None)})


class InboxEntryApi(ApiView):
    @extend_schema(
        operation_id="workspace_inbox_delete", responses={204: None, 404: ErrorSerializer}
    )
    def delete(self, request: Request, entry_id: str) -> Response:
        entry = selectors.owned_entry(request.user, entry_id)
        if entry is None or not services.entry_delete(entry=entry):
            return _not_found()
        return Response(status=status.HTTP_204_NO_CONTENT)


ReadSerializer = inline_serializer(
    "WorkspaceInboxRead", {"id": serializers.UUIDField(), "readAt": serializers.DateTimeField()}
)


class InboxEntryReadApi(ApiView):
    @extend_schema(
        operation_id="workspace_inbox_mark_read",
        request=None,
        responses={200: ReadSerializer, 404: ErrorSerializer},
    )
    def put(self, request: Request, entry_id: str) -> Response:
        entry = selectors.owned_entry(request.user, entry_id)
        if entry is None:
            return _not_found()
        read_at = services.entry_mark_read(entry=entry, user=request.user)
        return Response({"id": str(entry.pk), "readAt": read_at.isoformat()})

    @extend_schema(
        operation_id="workspace_inbox_mark_unread", responses={204: None, 404: ErrorSerializer}
    )
    def delete(self, request: Request, entry_id: str) -> Response:
        entry = selectors.owned_entry(request.user, entry_id)
        if entry is None:
            return _not_found()
        services.entry_mark_read(entry=entry, user=request.user, read=False)
        return Response(status=status.HTTP_204_NO_CONTENT)


def max_file_bytes() -> int:
    """The download route's own cap (GLOVE_WORKSPACE_DOWNLOAD_MAX_BYTES): it streams, so
    it serves files far over the inbox's render cap."""
    return download_max_bytes()


async def _stream(fd: int, size: int) -> AsyncIterator[bytes]:
    """At most `size` bytes (the size checked against the cap), even if the file grows."""
    try:
        left = size
        while left > 0:
            chunk = await asyncio.to_thread(os.read, fd, min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
    finally:
        os.close(fd)


def content_type_for(path: str) -> str:
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"


class WorkspaceFileApi(ApiView):
    @extend_schema(
        operation_id="workspace_file",
        parameters=[OpenApiParameter("path", str, required=True, description="Relative path.")],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            400: ErrorSerializer,
            404: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def get(self, request: Request, workspace_id: str) -> Any:
        workspace = selectors.owned_workspace(request.user, workspace_id)
        if workspace is None:
            return _error(404, "workspace_not_found")
        rel = request.query_params.get("path", "")
        if not rel:
            return _error(400, "path: path required", field="path")
        try:
            opened = paths.open_inside(workspace.root, rel, identity=workspace.root_identity)
        except paths.PathRefused as exc:
            return _error(400, "invalid_path", field="path", message=str(exc))
        except paths.FileMissing:
            return _error(404, "file_not_found")
        if opened.size > max_file_bytes():
            os.close(opened.fd)
            return _error(413, "file_too_large", sizeBytes=opened.size)
        content_type = content_type_for(rel)
        inline = content_type in INLINE_IMAGE_TYPES
        if _DOCUMENT_TYPES.search(content_type):
            content_type = "application/octet-stream"
        response = StreamingHttpResponse(_stream(opened.fd, opened.size), content_type=content_type)
        response["Content-Length"] = str(opened.size)
        response["Content-Disposition"] = content_disposition(
            os.path.basename(rel) or "download", inline=inline
        )
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox; default-src 'none'"
        response["Cache-Control"] = "private, no-store"  # docs are live: always the disk's copy
        return response
