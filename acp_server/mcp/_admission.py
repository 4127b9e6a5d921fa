"""The bridge's one rule about a session's MCP servers: who may start a command-running (stdio) server."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import InvalidInputError
from ..modes import MODES
from ._config import McpServerConfig

__all__ = ["check_mcp_servers"]


def check_mcp_servers(servers: Sequence[McpServerConfig] | None, allows_mode: Callable[[str], bool]) -> None:
    """A stdio MCP server is a command the agent runs: refused (``InvalidInputError``) where only the ``read-only``
    mode is offered (a daemon without a token), since there nothing a client sends may run anything."""
    if not servers or not any(server.transport == "stdio" for server in servers):
        return
    if not any(allows_mode(mode.id) for mode in MODES.values() if mode.changes):
        problem = "stdio MCP servers run commands: this server offers only the read-only mode"
        raise InvalidInputError.for_field("mcpServers", problem, f"Invalid params: mcpServers: {problem}")
