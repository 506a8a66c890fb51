"""Talking to MCP servers through the official `mcp` SDK client.

Each process owns one background thread running an asyncio loop, started on first use (so a Celery
prefork child starts its own after the fork, never inheriting the parent's). That loop owns the open
sessions: a stdio server is started once per process and kept; before each call a ping checks it is
still there, and a dead one is started again. Every wait has a bound (connect, ping, call), so an
unreachable or hung server fails the step with a reason instead of holding a worker.
"""

import asyncio
import logging
import os
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from django.conf import settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 15.0
PING_TIMEOUT_S = 3.0


class SourceUnavailable(Exception):
    """The server could not be reached, did not answer in time, or went away mid-call."""


class ToolCallFailed(Exception):
    """The server answered the call with isError; the message is the server's text."""


@dataclass(frozen=True)
class Endpoint:
    """How to reach one source: everything a connection depends on (a changed source opens a new one)."""

    name: str
    transport: str
    command: tuple[str, ...] = ()
    cwd: str = ""
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return f"MCP source `{self.name}`"


@dataclass
class ListedTool:
    name: str
    description: str
    input_schema: dict
    annotations: dict


def _errlog(name: str) -> TextIO:
    # Inside a Celery worker sys.stderr is a logging proxy without a file descriptor, which a subprocess
    # cannot inherit: the server's stderr goes to a file of its own.
    directory = Path(getattr(settings, "VAR_DIR", "var")) / "mcp"
    directory.mkdir(parents=True, exist_ok=True)
    return open(directory / f"{name}.stderr.log", "a", encoding="utf-8")  # noqa: SIM115 (closed with the connection)


def _transport(endpoint: Endpoint, errlog: TextIO):
    if endpoint.transport == "stdio":
        if not endpoint.command:
            raise SourceUnavailable(f"{endpoint.describe()} has no command.")
        command, *args = endpoint.command
        params = StdioServerParameters(command=command, args=list(args), env=dict(endpoint.env) or None, cwd=endpoint.cwd or None)
        return stdio_client(params, errlog=errlog)
    http: httpx2.AsyncClient = create_mcp_http_client(headers=dict(endpoint.headers) or None)
    return streamable_http_client(endpoint.url, http_client=http)


class _Connection:
    """One open session, entered and left inside a task of its own (anyio scopes must exit in the task
    that entered them); calls from other tasks share the session."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.client: Client | None = None
        self.ready = asyncio.Event()
        self.closing = asyncio.Event()
        self.failure: BaseException | None = None
        self.task: asyncio.Task | None = None

    async def open(self) -> "_Connection":
        self.task = asyncio.create_task(self._hold())
        try:
            await asyncio.wait_for(self.ready.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            self.task.cancel()
            raise SourceUnavailable(f"{self.endpoint.describe()} did not finish connecting within {CONNECT_TIMEOUT_S:g} s.") from None
        if self.client is None:
            raise SourceUnavailable(f"Could not connect to {self.endpoint.describe()}: {_reason(self.failure)}")
        return self

    async def _hold(self) -> None:
        errlog = _errlog(self.endpoint.name)
        try:
            async with Client(_transport(self.endpoint, errlog), cache=None) as client:
                self.client = client
                self.ready.set()
                await self.closing.wait()
        except BaseException as error:  # noqa: BLE001 (reported to whoever waits for the connection)
            self.failure = error
        finally:
            self.client = None
            self.ready.set()
            errlog.close()

    @property
    def alive(self) -> bool:
        return self.client is not None and self.task is not None and not self.task.done()

    async def close(self) -> None:
        self.closing.set()
        if self.task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.task), 10)
            except (TimeoutError, asyncio.CancelledError):
                self.task.cancel()


async def _answers(connection: _Connection) -> bool:
    """Whether the server still answers a request. Ping left the protocol in 2026-07-28, so a modern
    server answers it with an error, which proves it is there just as well."""
    try:
        with anyio.fail_after(PING_TIMEOUT_S):
            await connection.client.session.send_ping()
    except MCPError as error:
        return error.code not in {CONNECTION_CLOSED, REQUEST_TIMEOUT}
    except Exception:  # noqa: BLE001 (anything else: the connection is gone)
        return False
    return True


def _reason(error: BaseException | None) -> str:
    if error is None:
        return "the connection closed"
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_reason(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class Runtime:
    def __init__(self):
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: dict[Endpoint, _Connection] = {}

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._pid, self._connections = os.getpid(), {}
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="mcp-client-loop", daemon=True).start()
            return self._loop

    def run(self, coroutine, timeout: float) -> Any:
        """Run `coroutine` on the loop and wait at most `timeout` seconds for it."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._ensure_loop())
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise SourceUnavailable(f"No answer within {timeout:g} s.") from None
        except BaseException:
            future.cancel()  # a Celery soft time limit lands here: stop waiting on the loop too
            raise

    async def _connection(self, endpoint: Endpoint) -> _Connection:
        connection = self._connections.get(endpoint)
        if connection is not None and connection.alive and await _answers(connection):
            return connection
        if connection is not None:
            log.warning("%s stopped answering; reconnecting", endpoint.describe())
        if connection is not None:
            self._connections.pop(endpoint, None)
            await connection.close()
        connection = await _Connection(endpoint).open()
        self._connections[endpoint] = connection
        return connection

    async def _call(self, endpoint: Endpoint, tool: str, arguments: dict, timeout: float):
        connection = await self._connection(endpoint)
        try:
            return await connection.client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as error:
            if error.code not in {CONNECTION_CLOSED, REQUEST_TIMEOUT}:
                raise ToolCallFailed(f"the server refused the call: {error}") from error
            await self._drop(endpoint, connection)
            if error.code == REQUEST_TIMEOUT:
                raise SourceUnavailable(f"{endpoint.describe()} did not answer `{tool}` within {timeout:g} s.") from error
            raise SourceUnavailable(f"{endpoint.describe()} closed the connection during the call to `{tool}`.") from error
        except Exception as error:
            await self._drop(endpoint, connection)
            raise SourceUnavailable(f"{endpoint.describe()} did not answer `{tool}` within {timeout:g} s.") from error
            raise SourceUnavailable(f"{endpoint.describe()} failed during the call to `{tool}`: {_reason(error)}") from error

    async def _drop(self, endpoint: Endpoint, connection: _Connection) -> None:
        # The session is suspect after a transport failure: the next call starts a fresh one.
        if self._connections.get(endpoint) is connection:
            self._connections.pop(endpoint)
        await connection.close()

    def call_tool(self, endpoint: Endpoint, tool: str, arguments: dict, *, timeout: float) -> Any:
        """The tool's output: its structuredContent, else its text content. Raises ToolCallFailed for an
        isError answer and SourceUnavailable when the server cannot answer."""
        result = self.run(self._call(endpoint, tool, arguments, timeout), timeout + CONNECT_TIMEOUT_S + PING_TIMEOUT_S + 5)
        text = "\n".join(getattr(part, "text", f"[{part.type} content]") for part in result.content or [])
        if result.is_error:
            raise ToolCallFailed(text or f"`{tool}` reported an error without a message.")
        return result.structured_content if result.structured_content is not None else text

    async def _list(self, endpoint: Endpoint) -> list[ListedTool]:
        # A sync uses a connection of its own, closed afterwards: the web process keeps no servers running.
        connection = await _Connection(endpoint).open()
        try:
            listed, cursor = [], None
            for _ in range(100):
                page = await connection.client.list_tools(cursor=cursor, cache_mode="refresh")
                listed += [_listed(tool) for tool in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    return listed
            return listed
        finally:
            await connection.close()

    def list_tools(self, endpoint: Endpoint, *, timeout: float = 60.0) -> list[ListedTool]:
        try:
            return self.run(self._list(endpoint), timeout)
        except SourceUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 (any failure to list is the source being unavailable)
            raise SourceUnavailable(f"Could not list the tools of {endpoint.describe()}: {_reason(error)}") from error

    def close_all(self) -> None:
        loop = self._loop
        if loop is None or self._pid != os.getpid():
            return
        connections, self._connections = list(self._connections.values()), {}

        async def close():
            for connection in connections:
                await connection.close()

        asyncio.run_coroutine_threadsafe(close(), loop).result(30)


def _listed(tool) -> ListedTool:
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    return ListedTool(
        name=tool.name, description=tool.description or "", input_schema=dict(tool.input_schema or {}), annotations=annotations
    )


runtime = Runtime()
