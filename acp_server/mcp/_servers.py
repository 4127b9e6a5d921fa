"""A session's MCP servers: their connections, and the tools they add to the session's :class:`ToolSet`.

Lifetime: :meth:`McpServers.connect` starts every server at once (each connection is hosted by a task of the
given task group, the bridge's) and returns when each is up or has failed, or after ``connect_timeout_s`` (a slow
server never holds a ``session/new`` longer; it is stopped and counts as failed). A server that fails (cannot
start, answers an error, dies later) is logged with its name and reason, its tools leave the set, and the others
work on; the client reads :meth:`McpServers.status`. A dead server is started again by :meth:`revive` (the turn
calls it once per prompt). :meth:`close` stops them all (stdio servers' process groups terminated and reaped);
:meth:`aclose` also waits until they have stopped.

Prompts: the servers' prompts are :meth:`McpServers.prompts` (the protocol side in ``_prompts``; as slash commands,
:mod:`acp_server.commands`). ``connect`` also waits, at most ``prompts_wait_s`` more, for each server's first
prompts listing; a listing that comes later, a re-listing and a server that goes or comes back are told to
``on_prompts`` (the session's command list changed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from ..tools.registry import ToolSet
from ._config import McpServerConfig
from ._connection import McpConnection
from ._elicitation import SESSION_ELICITOR
from ._exceptions import McpPromptError
from ._prompts import McpPrompt, mcp_prompt
from ._stdio import STOP_GRACE_S
from ._tools import ToolNames, mcp_tools

if TYPE_CHECKING:
    from mcp import types

__all__ = [
    "DEFAULT_MCP_CALL_TIMEOUT_S",
    "DEFAULT_MCP_CONNECT_TIMEOUT_S",
    "DEFAULT_MCP_PROMPTS_WAIT_S",
    "McpServers",
    "McpSettings",
]

logger = logging.getLogger("acp_server.mcp")

DEFAULT_MCP_CONNECT_TIMEOUT_S = 10.0
DEFAULT_MCP_CALL_TIMEOUT_S = 120.0
DEFAULT_MCP_PROMPTS_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class McpSettings:
    """How long a server may take to connect (``initialize`` + ``tools/list``), to answer one call (a tool call,
    ``prompts/list``, ``prompts/get``), and how much longer a connect waits for its first prompts listing."""

    connect_timeout_s: float = DEFAULT_MCP_CONNECT_TIMEOUT_S
    call_timeout_s: float = DEFAULT_MCP_CALL_TIMEOUT_S
    version: str = "0"
    prompts_wait_s: float = DEFAULT_MCP_PROMPTS_WAIT_S

    def __post_init__(self) -> None:
        if not self.connect_timeout_s > 0 or not self.call_timeout_s > 0 or not self.prompts_wait_s >= 0:
            raise ValueError("MCP timeouts must be > 0")


class McpServers:
    """The MCP connections of one session, adding their tools to ``tools`` (each server as its own source)."""

    def __init__(
        self,
        tools: ToolSet,
        cwd: str,
        settings: McpSettings,
        on_prompts: Callable[[], None] | None = None,
        session_id: str = "",
    ) -> None:
        self.tools = tools
        self.session_id = session_id  # told to the editor with a server's elicitation
        self._elicitor = SESSION_ELICITOR.get()  # the opener's editor answers the servers' elicitations
        self._on_prompts = on_prompts
        self.cwd = cwd
        self.settings = settings
        self.configs: tuple[McpServerConfig, ...] = ()
        self._connections: dict[str, McpConnection] = {}
        self._names = ToolNames()  # the session's MCP tool names, stable across re-listings and reconnections
        self._tg: TaskGroup | None = None
        self._closed = False
        self._told_down: set[str] = set()  # servers down whose user was told so (a notice): told again once up
        tools.before_prompt = self.revive  # once per prompt, the turn revives the servers that died

    def _published(self, connection: McpConnection) -> None:
        if self._connections.get(connection.name) is not connection:
            return  # replaced by a newer connection of the same name
        if not connection.tools or not connection.up:
            self.tools.drop_source(connection.name)
            return
        others = self.tools.names_except(connection.name)
        self.tools.set_source(connection.name, mcp_tools(connection, others, self._call_timeout, self._names))

    def _prompts_changed(self, connection: McpConnection) -> None:
        if self._connections.get(connection.name) is connection and self._on_prompts is not None:
            self._on_prompts()

    def _call_timeout(self) -> float:
        return self.settings.call_timeout_s

    def _start(self, config: McpServerConfig) -> McpConnection:
        assert self._tg is not None
        connection = McpConnection(
            config,
            self.cwd,
            self._published,
            version=self.settings.version,
            on_prompts=self._prompts_changed,
            request_timeout_s=self.settings.call_timeout_s,
            session_id=self.session_id,
            elicitor=self._elicitor,
        )
        self._connections[config.name] = connection
        connection.start(self._tg)
        return connection

    async def _await_ready(self, connection: McpConnection) -> None:
        timeout = self.settings.connect_timeout_s
        with anyio.move_on_after(timeout):
            await connection.ready.wait()
        if not connection.ready.is_set():
            connection._fail(f"not connected within {timeout:g} s; stopped")
            return
        with anyio.move_on_after(self.settings.prompts_wait_s):
            await connection.prompts_listed.wait()  # later: told to on_prompts when it comes

    async def _wait_all(self, connections: Sequence[McpConnection]) -> None:
        async with anyio.create_task_group() as tg:
            for connection in connections:
                tg.start_soon(self._await_ready, connection)

    async def connect(self, configs: Sequence[McpServerConfig], tg: TaskGroup) -> None:
        """Connect to ``configs`` (replacing any connection this set had: the newest env and headers win), all at
        once, each bounded by the connect timeout. Never raises but for cancellation (then every server started is
        stopped)."""
        self._tg = tg
        had_prompts = bool(self.prompts())
        await self._stop_all()
        self.configs = tuple(configs)
        if had_prompts and self._on_prompts is not None:
            self._on_prompts()  # the replaced servers' prompts are gone (the new ones tell theirs as they list)
        if self._closed or not configs:
            return
        started = [self._start(config) for config in self.configs]
        try:
            await self._wait_all(started)
        except BaseException:
            self.close()
            raise

    async def revive(self) -> tuple[tuple[str, str], ...]:
        """Start again, once, every server that has stopped (not one that was closed); bounded like
        :meth:`connect`. Returns the servers still down whose fall was not told yet (name, why): told once per
        fall, again after it came back and fell again."""
        if self._closed or self._tg is None:
            return ()
        dead = [c for c in self._connections.values() if c.ended.is_set() or (c.ready.is_set() and not c.up)]
        for connection in dead:
            connection.close()
            logger.info("mcp %s: reconnecting (%s)", connection.name, connection.problem)
        if dead:
            await self._wait_all([self._start(connection.config) for connection in dead])
        fallen: list[tuple[str, str]] = []
        for name, connection in self._connections.items():
            if connection.up:
                self._told_down.discard(name)
            elif (connection.ready.is_set() or connection.ended.is_set()) and name not in self._told_down:
                self._told_down.add(name)
                fallen.append((name, connection.problem or "not connected"))
        return tuple(fallen)

    def status(self) -> list[dict[str, Any]]:
        """Each server's state for the client: ``{name, transport, status: connected|failed, tools, error?}``."""
        states: list[dict[str, Any]] = []
        for config in self.configs:
            connection = self._connections.get(config.name)
            up = connection is not None and connection.up
            state: dict[str, Any] = {
                "name": config.name,
                "transport": config.transport,
                "status": "connected" if up else "failed",
                "tools": len(self.tools.names) - len(self.tools.names_except(config.name)),
            }
            if not up:
                state["error"] = (connection.problem if connection is not None else None) or "not connected"
            states.append(state)
        return states

    def prompts(self) -> tuple[McpPrompt, ...]:
        """The prompts of the servers that are up, as commands (servers in the order given, prompts as listed)."""
        prompts: list[McpPrompt] = []
        taken: set[str] = set()
        for config in self.configs:
            connection = self._connections.get(config.name)
            if connection is None or not connection.up:
                continue
            for listed in connection.prompts:
                prompts.append(mcp_prompt(config.name, listed, taken))
                taken.add(prompts[-1].command)
        return tuple(prompts)

    async def get_prompt(self, prompt: McpPrompt, arguments: dict[str, str]) -> types.GetPromptResult:
        """``prompts/get`` of ``prompt`` on its server (bounded by the call timeout; see
        :meth:`McpConnection.get_prompt`)."""
        connection = self._connections.get(prompt.server)
        if connection is None:
            raise McpPromptError(f"the MCP server '{prompt.server}' is no longer connected")
        return await connection.get_prompt(prompt.name, arguments)

    async def _stop_all(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.close()
            self.tools.drop_source(connection.name)
        with anyio.CancelScope(shield=True), anyio.move_on_after(3 * STOP_GRACE_S + 1):
            for connection in connections:
                await connection.ended.wait()

    def close(self) -> None:
        """Stop every server (their host tasks unwind in the task group); no server is started again."""
        self._closed = True
        for connection in self._connections.values():
            connection.close()
            self.tools.drop_source(connection.name)

    async def aclose(self) -> None:
        """:meth:`close`, then wait until every server has stopped (bounded by the stop graces)."""
        self._closed = True
        await self._stop_all()
