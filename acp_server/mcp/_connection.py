"""One MCP connection: the SDK's ``ClientSession`` over a transport, held open by one host task until closed.

The host task enters the transport and the session (the SDK's contexts must be left by the task that entered them),
``initialize``s, lists the tools, publishes them, then waits: for a ``tools/list_changed`` (it re-lists, at most once
per :data:`RELIST_INTERVAL_S`) or for :meth:`McpConnection.close`. Beside that, a server that advertises the
``prompts`` capability has its prompts listed (and re-listed on ``prompts/list_changed``, as rarely), each listing
bounded in pages, count and time; a listing that fails or times out leaves the prompts empty (logged), never the
connection down.

A call runs in the caller's task on the open session. The connection is *up* from the
first listing until the transport ends, the server fails, or it is closed; then its tools' calls fail with the
reason. Everything the server sends is handled in bounded memory: notifications only set a flag, server requests
we do not support (sampling, roots; elicitation when the session's editor cannot answer it, see ``_elicitation``) are
answered with the SDK's MCP error.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from ..tools import ToolCallError
from ..urls import without_url_secrets
from ._config import McpServerConfig, server_environment
from ._elicitation import Elicitor, elicitation_callback
from ._exceptions import McpPromptError
from ._stdio import stdio_transport

if TYPE_CHECKING:
    from mcp import ClientSession, types

__all__ = ["CANCEL_NOTICE_TIMEOUT_S", "MAX_LISTED_PROMPTS", "RELIST_INTERVAL_S", "McpConnection"]

logger = logging.getLogger("acp_server.mcp")

CANCEL_NOTICE_TIMEOUT_S = 1.0
"""How long the ``notifications/cancelled`` of a cancelled call may take to send."""

_MAX_LISTED_TOOLS = 512
RELIST_INTERVAL_S = 1.0
"""The least time between two listings of a server's tools, or of its prompts: the `*/list_changed` notifications
that come meanwhile are one re-listing (a server cannot drive re-listings, nor updates to the editor, in a loop)."""
_HTTP_TIMEOUT_S = 30.0  # an HTTP server's connect and write timeouts
_HTTP_READ_TIMEOUT_S = 300.0  # how long its event stream may stay silent
_MAX_LIST_PAGES = 16
MAX_LISTED_PROMPTS = 128
"""Prompts of one server offered as commands (the others are logged and left out)."""

_T = TypeVar("_T")
_Page = tuple[Sequence[_T], str | None]  # one page's items and the next cursor (None: the last page)


def _session_class() -> type[ClientSession]:
    """The SDK's ``ClientSession`` that tells the server when a request is abandoned: a request cancelled in our
    task (the user's cancel, a call timeout) sends MCP's ``notifications/cancelled`` with its id."""
    from mcp import ClientSession, types

    class CancellingSession(ClientSession):
        async def send_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            request_id = self._request_id  # the id the SDK gives this request
            try:
                return await super().send_request(request, *args, **kwargs)
            except anyio.get_cancelled_exc_class():
                params = types.CancelledNotificationParams(requestId=request_id, reason="cancelled by the user")
                notice = types.ClientNotification(types.CancelledNotification(params=params))
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(CANCEL_NOTICE_TIMEOUT_S),
                    contextlib.suppress(Exception),
                ):
                    await self.send_notification(notice)
                raise

    return CancellingSession


class McpConnection:
    """One server of one session. ``on_tools(connection)`` is called each time its tool list changes (listed,
    re-listed, or gone: ``tools`` is then empty), ``on_prompts(connection)`` each time its prompts do;
    ``request_timeout_s`` bounds a ``prompts/list`` and a ``prompts/get``."""

    def __init__(
        self,
        config: McpServerConfig,
        cwd: str,
        on_tools: Callable[[McpConnection], None],
        *,
        request_timeout_s: float,
        version: str = "0",
        on_prompts: Callable[[McpConnection], None] | None = None,
        session_id: str = "",
        elicitor: Elicitor | None = None,
    ) -> None:
        self.config = config
        # the editor that answers the server's elicitation/create (None: not offered): see ``_elicitation``
        self._elicitation = elicitation_callback(config.name, session_id, elicitor)
        self.cwd = cwd
        self.tools: tuple[types.Tool, ...] = ()
        self.prompts: tuple[types.Prompt, ...] = ()  # empty: none, not listed yet, or not up
        self.prompts_listed = anyio.Event()  # set once: the first prompts listing is done (or there is none)
        self._on_prompts = on_prompts
        self._request_timeout_s = request_timeout_s  # how long a prompts/list or prompts/get may take
        self._relist_prompts = anyio.Event()
        self.problem: str | None = None  # why it is not up (None while starting or up)
        self.ready = anyio.Event()  # set once: listed (up) or failed
        self.ended = anyio.Event()  # set when the host task has left (process reaped)
        self._down = anyio.Event()  # set once it failed or was closed: a request under way then ends at once
        self._on_tools = on_tools
        self._version = version
        self._session: ClientSession | None = None
        self._close = anyio.Event()
        self._relist = anyio.Event()
        self._scope = anyio.CancelScope()  # the host's: cancelled by a close that comes before the connection is up

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def up(self) -> bool:
        return self._session is not None and self.problem is None

    def start(self, tg: TaskGroup) -> None:
        tg.start_soon(self._host, name=f"MCP server {self.name}")

    def close(self) -> None:
        """Ask the host task to disconnect (it stops the server); :attr:`ended` is set once it has."""
        self._close.set()
        self._scope.cancel()  # also while connecting or re-listing: never wait for the server

    def _fail(self, problem: str) -> None:
        problem = without_url_secrets(problem)  # told to the client and logged: a URL's query may hold a key
        self._down.set()
        if self.problem is None:
            self.problem = "closed" if self._close.is_set() else problem  # a stop we asked for is no failure
            if not self._close.is_set():
                logger.warning("mcp %s: %s", self.name, problem)
        self._session = None
        self.close()
        self.ready.set()
        with contextlib.suppress(Exception):
            self._on_tools(self)  # its tools leave the offer as it is marked failed, not once its task has unwound
        self._prompts_gone()

    def _prompts_gone(self) -> None:
        self.prompts_listed.set()
        if self.prompts:
            self.prompts = ()
            if self._on_prompts is not None:
                with contextlib.suppress(Exception):
                    self._on_prompts(self)

    async def _transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        config = self.config
        if config.transport == "stdio":
            env = server_environment(config)
            return await stack.enter_async_context(
                stdio_transport(
                    config.name,
                    config.command,
                    config.args,
                    env,
                    self.cwd,
                    lambda reason: self._fail(f"the server stopped: {reason}"),
                )
            )
        headers = dict(config.headers) or None
        from ._http import bounded_http_client

        client = partial(bounded_http_client, on_too_large=lambda reason: self._fail(f"the server stopped: {reason}"))
        if config.transport == "http":
            import httpx
            from mcp.client.streamable_http import streamable_http_client

            timeout = httpx.Timeout(_HTTP_TIMEOUT_S, read=_HTTP_READ_TIMEOUT_S)
            http = await stack.enter_async_context(client(headers, timeout))
            read, write, _ = await stack.enter_async_context(streamable_http_client(config.url, http_client=http))
            return read, write
        from mcp.client.sse import sse_client

        return await stack.enter_async_context(sse_client(config.url, headers=headers, httpx_client_factory=client))

    async def _paged(self, what: str, page: Callable[[str | None], Awaitable[_Page[_T]]], cap: int) -> tuple[_T, ...]:
        """A paged listing (``tools/list``, ``prompts/list``): at most ``_MAX_LIST_PAGES`` pages, ``cap`` items kept
        (what a server lists past that is logged and left out)."""
        items: list[_T] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            found, cursor = await page(cursor)
            items.extend(found)
            if not cursor or len(items) >= cap:
                break
        if len(items) > cap:
            logger.warning("mcp %s: %d %s listed; only the first %d are offered", self.name, len(items), what, cap)
        return tuple(items[:cap])

    async def _list(self, session: ClientSession) -> tuple[types.Tool, ...]:
        async def page(cursor: str | None) -> _Page[types.Tool]:
            result = await session.list_tools(cursor=cursor)
            return result.tools, result.nextCursor

        return await self._paged("tools", page, _MAX_LISTED_TOOLS)

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self._relist.set()
        elif isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.PromptListChangedNotification
        ):
            self._relist_prompts.set()
        elif isinstance(message, Exception):
            logger.debug("mcp %s: %s", self.name, str(message)[:500])

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        logger.debug("mcp %s (log %s): %s", self.name, params.level, str(params.data)[:2000])

    async def _host(self) -> None:
        try:
            with self._scope:
                await self._connected()
        except Exception as exc:
            self._fail(_reason(exc))
        finally:
            self._session = None
            if self.problem is None:
                self.problem = "closed"
            self.tools = ()
            self.ready.set()
            self._down.set()
            self.ended.set()
            with contextlib.suppress(Exception):
                self._on_tools(self)
            self._prompts_gone()

    async def _connected(self) -> None:
        from mcp import types

        async with AsyncExitStack() as stack:
            read, write = await self._transport(stack)
            info = types.Implementation(name="acp-server", version=self._version)
            session = await stack.enter_async_context(
                _session_class()(
                    read,
                    write,
                    message_handler=self._on_message,
                    logging_callback=self._on_log,
                    elicitation_callback=self._elicitation,
                    client_info=info,
                )
            )
            await session.initialize()
            self.tools = await self._list(session)
            if self._close.is_set():
                return
            self._session = session
            self._on_tools(self)
            self.ready.set()
            logger.info("mcp %s: connected, %d tools", self.name, len(self.tools))
            capabilities = session.get_server_capabilities()
            async with anyio.create_task_group() as loops:
                loops.start_soon(self._tools_loop, session)
                if capabilities is not None and capabilities.prompts is not None:
                    loops.start_soon(self._prompts_loop, session)
                else:
                    self.prompts_listed.set()
                await self._close.wait()
                loops.cancel_scope.cancel()

    async def _tools_loop(self, session: ClientSession) -> None:
        """List the tools again at each ``tools/list_changed`` (at most once per :data:`RELIST_INTERVAL_S`); a
        re-listing that fails or takes longer than the request timeout keeps the last list (logged; the server stays
        up)."""
        from mcp.shared.exceptions import McpError
        from pydantic import ValidationError

        listed = anyio.current_time()
        while True:
            await self._relist.wait()
            await anyio.sleep_until(listed + RELIST_INTERVAL_S)  # what comes meanwhile is this one re-listing
            listed = anyio.current_time()
            self._relist = anyio.Event()
            try:
                with anyio.fail_after(self._request_timeout_s):
                    tools = await self._list(session)
            except (McpError, TimeoutError, ValidationError) as exc:
                logger.warning(
                    "mcp %s: tools not re-listed (%s); the last list stays",
                    self.name,
                    _listing_failure(exc, self._request_timeout_s),
                )
                continue
            self.tools = tools
            logger.info("mcp %s: tools re-listed, %d tools", self.name, len(self.tools))
            self._on_tools(self)

    async def _prompts_loop(self, session: ClientSession) -> None:
        """List the prompts, then again at each ``prompts/list_changed`` (at most once per
        :data:`RELIST_INTERVAL_S`); a listing that fails or takes longer than the request timeout leaves none (the
        server stays up: its tools work on)."""
        from mcp.shared.exceptions import McpError
        from pydantic import ValidationError

        while True:
            listed = anyio.current_time()
            self._relist_prompts = anyio.Event()
            try:
                with anyio.fail_after(self._request_timeout_s):
                    prompts = await self._list_prompts(session)
            except (McpError, TimeoutError, ValidationError) as exc:
                why = _listing_failure(exc, self._request_timeout_s)
                logger.warning("mcp %s: prompts not listed: %s", self.name, why)
                prompts = ()
            changed = prompts != self.prompts
            self.prompts = prompts
            logger.info("mcp %s: %d prompts listed", self.name, len(prompts))
            if changed and self._on_prompts is not None:
                self._on_prompts(self)
            self.prompts_listed.set()
            await self._relist_prompts.wait()
            await anyio.sleep_until(listed + RELIST_INTERVAL_S)  # what comes meanwhile is this one re-listing

    async def _list_prompts(self, session: ClientSession) -> tuple[types.Prompt, ...]:
        async def page(cursor: str | None) -> _Page[types.Prompt]:
            result = await session.list_prompts(cursor=cursor)
            return result.prompts, result.nextCursor

        return await self._paged("prompts", page, MAX_LISTED_PROMPTS)

    def _why(self) -> str:
        """Why it stopped, for a message (``" (…)"``; empty when closed on purpose or not known)."""
        return f" ({self.problem})" if self.problem not in (None, "closed") else ""

    async def _while_up(self, request: Callable[[], Awaitable[_T]]) -> _T:
        """``request()``, cut short (:class:`anyio.ClosedResourceError`) when the connection fails or is closed
        meanwhile: the SDK does not answer the requests under way of a session whose host was cancelled."""
        done: list[_T] = []
        failed: list[Exception] = []
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                await self._down.wait()
                group.cancel_scope.cancel()

            group.start_soon(watch, name=f"MCP server {self.name}: request watch")
            try:
                done.append(await request())
            except Exception as exc:  # raised as it is, not in a group
                failed.append(exc)
            group.cancel_scope.cancel()
        if failed:
            raise failed[0]
        if not done:
            raise anyio.ClosedResourceError
        return done[0]

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        """``prompts/get``; raises :class:`McpPromptError` when the server is not up, answers an error, or does not
        answer within the request timeout (the request is then cancelled on the server). Cancellation propagates
        (after ``notifications/cancelled``)."""
        return await self._request(
            McpPromptError, self._request_timeout_s, "request", lambda session: session.get_prompt(name, arguments)
        )

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> types.CallToolResult:
        """Call ``tool``; raises :class:`ToolCallError` when the server is not up, fails the request, or does not
        answer within ``timeout_s`` (the request is then cancelled on the server). Cancellation propagates (after
        ``notifications/cancelled``)."""
        wait = timedelta(seconds=timeout_s + 1)

        def send(session: ClientSession) -> Awaitable[types.CallToolResult]:
            return session.call_tool(tool, arguments, read_timeout_seconds=wait)

        return await self._request(ToolCallError, timeout_s, "call", send)

    async def _request(
        self, error: type[Exception], timeout_s: float, what: str, send: Callable[[ClientSession], Awaitable[_T]]
    ) -> _T:
        """``send(session)`` on the running session, its failures mapped once to ``error`` naming the server: not up,
        no answer within ``timeout_s`` (the request is then cancelled on the server), an error answer, the
        connection failing or closed meanwhile. Cancellation propagates as is."""
        from mcp.shared.exceptions import McpError
        from pydantic import ValidationError

        session = self._session
        if session is None or self.problem is not None:
            raise error(f"the MCP server '{self.name}' is not running ({self.problem or 'not connected'})")
        try:
            with anyio.fail_after(timeout_s):
                return await self._while_up(lambda: send(session))
        except TimeoutError:
            raise error(
                f"the MCP server '{self.name}' did not answer within {timeout_s:g} s; the {what} was cancelled"
            ) from None
        except McpError as exc:
            message = without_url_secrets(exc.error.message)
            raise error(f"the MCP server '{self.name}' answered an error: {message}") from None
        except ValidationError:  # the SDK checks every result against MCP's schema
            raise error(f"the MCP server '{self.name}' answered an invalid result (not MCP's schema)") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise error(f"the MCP server '{self.name}' stopped during the {what}{self._why()}") from None


def _listing_failure(exc: Exception, timeout_s: float) -> str:
    """Why a listing failed, for the log: no answer in time, an invalid result, or the server's error."""
    from pydantic import ValidationError

    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, ValidationError):
        return "an invalid result (not MCP's schema)"
    return without_url_secrets(str(exc))[:300]


def _reason(exc: BaseException) -> str:
    """A failure to connect as one line for the log and the client (never the server's env or headers)."""
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _reason(inner)
    if isinstance(exc, FileNotFoundError):
        return f"cannot start: command not found ({exc.filename})"
    if isinstance(exc, OSError):
        return f"cannot start: {exc.strerror or exc}"
    from mcp.shared.exceptions import McpError

    if isinstance(exc, McpError):
        return f"the server answered an error: {without_url_secrets(exc.error.message)}"
    text = without_url_secrets(str(exc).splitlines()[0])[:300] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
