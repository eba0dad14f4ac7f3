"""One client session with one MCP server, through the official `mcp` SDK.

The SDK's transports are anyio context managers that must be entered and left by the same
task, while a turn's tool calls run in tasks of their own. So each connection owns one
background task that opens the transport and the `ClientSession`, waits until it is told to
close, and closes them; calls from any task go through the session. A server that dies
ends that task: calls in flight and later calls fail at once instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx

from gloveapp.core.mcp.config import McpServerConfig

logger = logging.getLogger("gloveapp.core.mcp")

CLIENT_NAME = "glove-django"
CLIENT_VERSION = "0.1.0"


class McpUnavailable(Exception):
    """The server could not be reached, or its connection ended."""


class McpCallTimeout(Exception):
    pass


@dataclass(frozen=True, slots=True)
class McpToolDef:
    """A tool as the server lists it."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    read_only: bool = False
    destructive: bool = False
    # What people read for it: the tool's own `title`, else its annotations' title.
    title: str | None = None


@dataclass(frozen=True, slots=True)
class McpCallResult:
    content: list[dict[str, Any]]
    structured_content: Any = None
    is_error: bool = False


class McpConnection:
    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._closing = asyncio.Event()
        self._ended = asyncio.Event()
        self.failure: BaseException | None = None

    @property
    def alive(self) -> bool:
        return self._session is not None and not self._ended.is_set()

    async def open(self) -> McpConnection:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._task = loop.create_task(self._serve(), name=f"mcp:{self.config.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.config.connect_timeout)
        except TimeoutError:
            await self.close()
            raise McpUnavailable(f"no answer within {self.config.connect_timeout:g} s") from None
        except McpUnavailable:
            await self.close()
            raise
        return self

    async def _serve(self) -> None:
        assert self._ready is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                from mcp import ClientSession
                from mcp.types import Implementation

                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        client_info=Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
                        message_handler=self._on_message,
                    )
                )
                # A transport failure during the handshake (a 401) reaches the message
                # handler, not `initialize`, which would wait for ever.
                handshake = asyncio.ensure_future(session.initialize())
                lost = asyncio.ensure_future(self._ended.wait())
                try:
                    await asyncio.wait({handshake, lost}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    lost.cancel()
                if not handshake.done():
                    handshake.cancel()
                    with contextlib.suppress(BaseException):
                        await handshake
                    raise McpUnavailable(describe(self.failure or RuntimeError("closed")))
                handshake.result()
                self._session = session
                if not self._ready.done():
                    self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as error:  # ending the connection, whatever ended it
            self.failure = error
            if not self._ready.done():
                self._ready.set_exception(McpUnavailable(describe(error)))
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self._session = None
            self._ended.set()

    async def _on_message(self, message: Any) -> None:
        # The SDK hands transport failures (a POST whose server died mid-answer) to the
        # message handler and leaves the request waiting: end the connection instead, so the
        # call fails now and the next one connects again.
        if isinstance(message, Exception):
            logger.warning("MCP server %s: %s", self.config.name, describe(message))
            self.failure = message
            self._ended.set()
            self._closing.set()

    @contextlib.asynccontextmanager
    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "http":
            from mcp.client.streamable_http import streamable_http_client

            client = await stack.enter_async_context(
                httpx.AsyncClient(
                    headers=config.resolved_headers(),
                    timeout=httpx.Timeout(config.connect_timeout, read=None),
                    transport=_WatchedTransport(httpx.AsyncHTTPTransport(), self._on_message),
                )
            )
            async with streamable_http_client(config.url or "", http_client=client) as streams:
                yield streams[0], streams[1]
            return
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=resolve_command(config.command or ""),
            args=list(config.args),
            env=config.resolved_env() or None,
            cwd=config.cwd,
        )
        async with stdio_client(params, errlog=sys.stderr) as streams:
            yield streams

    async def _call(self, coro: Any, seconds: float, what: str) -> Any:
        """Run one request; fail at once when the connection ends meanwhile."""
        if not self.alive:
            coro.close()
            raise McpUnavailable(self._why_gone())
        request = asyncio.ensure_future(coro)
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            done, _ = await asyncio.wait(
                {request, ended}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ended.cancel()
        if request in done:
            return request.result()
        request.cancel()
        with contextlib.suppress(BaseException):
            await request
        if ended in done:
            raise McpUnavailable(self._why_gone())
        raise McpCallTimeout(f"{what} timed out after {seconds:g} s")

    def _why_gone(self) -> str:
        if self.failure is not None and not isinstance(self.failure, asyncio.CancelledError):
            return f"the connection to the MCP server was lost ({describe(self.failure)})"
        return "the connection to the MCP server was lost"

    async def list_tools(self) -> list[McpToolDef]:
        session = self._session
        tools: list[McpToolDef] = []
        cursor: str | None = None
        while True:
            page = await self._call(
                session.list_tools(cursor=cursor) if cursor else session.list_tools(),
                self.config.timeout,
                "listing the tools",
            )
            for tool in page.tools:
                annotations = tool.annotations
                tools.append(
                    McpToolDef(
                        name=tool.name,
                        description=tool.description,
                        input_schema=dict(tool.inputSchema or {"type": "object"}),
                        output_schema=dict(tool.outputSchema) if tool.outputSchema else None,
                        read_only=bool(annotations and annotations.readOnlyHint),
                        destructive=bool(annotations and annotations.destructiveHint),
                        title=getattr(tool, "title", None)
                        or (getattr(annotations, "title", None) if annotations else None),
                    )
                )
            cursor = page.nextCursor
            if not cursor:
                break
        excluded = set(self.config.exclude_tools)
        return [tool for tool in tools if tool.name not in excluded]

    async def call_tool(self, name: str, arguments: Any) -> McpCallResult:
        session = self._session
        timeout = self.config.timeout
        result = await self._call(
            session.call_tool(
                name,
                arguments if isinstance(arguments, dict) else {},
                read_timeout_seconds=timedelta(seconds=timeout + 1),
            ),
            timeout,
            f"MCP tool {name}",
        )
        return McpCallResult(
            content=[part.model_dump(mode="json", exclude_none=True) for part in result.content],
            structured_content=result.structuredContent,
            is_error=bool(result.isError),
        )

    async def close(self) -> None:
        self._closing.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 5)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:
            pass  # already recorded in self.failure


class _WatchedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that reports every network failure to the connection.

    The SDK swallows an SSE stream that breaks mid-answer (it tries to resume, then gives
    up silently), leaving the call waiting until its timeout. A server that went away is
    a lost connection here: the call fails now and the next one connects again.
    """

    def __init__(
        self, inner: httpx.AsyncBaseTransport, on_failure: Callable[[Exception], Awaitable[None]]
    ) -> None:
        self._inner = inner
        self._on_failure = on_failure

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError as error:
            await self._on_failure(error)
            raise
        response.stream = _WatchedStream(response.stream, self._on_failure)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._inner.__aexit__(*exc_info)


class _WatchedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, on_failure: Callable[[Exception], Awaitable[None]]) -> None:
        self._inner = inner  # the response's stream, async here (an async client's)
        self._on_failure = on_failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx.TransportError as error:
            await self._on_failure(error)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


def resolve_command(command: str) -> str:
    """A stdio server's program: a path as given; a bare name from the PATH, else beside this
    Python (the console scripts of its virtual environment, which a process started as
    `.venv/bin/python manage.py turn_worker` does not have on its PATH). A name found in
    neither raises FileNotFoundError naming it and where it was looked for."""
    if not command or os.sep in command or (os.altsep and os.altsep in command):
        return command
    beside_python = os.path.dirname(sys.executable)
    found = shutil.which(command) or shutil.which(command, path=beside_python)
    if found is None:
        raise FileNotFoundError(f"command {command!r} not found on the PATH or in {beside_python}")
    return found


def describe(error: BaseException) -> str:
    """A one-line account of what ended a connection (anyio groups unwrapped)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def connect(config: McpServerConfig) -> McpConnection:
    return await McpConnection(config).open()
