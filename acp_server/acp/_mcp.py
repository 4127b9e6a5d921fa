"""ACP's ``mcpServers`` to the MCP servers a session connects to, and the servers' state told to the client.

A session answer (``session/new``, ``load``, ``resume``, ``fork``) of a session with MCP servers carries
``_meta.acpServer.mcpServers``: one ``{name, transport, status: "connected"|"failed", tools, error?}`` per server, so
the client learns once, with the answer, which servers failed and why (their tools are absent; the session works
with the others).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..bridge import SessionEntry
from ..mcp import McpServerConfig, parse_mcp_servers

__all__ = ["mcp_meta", "mcp_servers_of"]


def mcp_servers_of(servers: Sequence[Any] | None) -> tuple[McpServerConfig, ...] | None:
    """The servers of a request's validated ``mcpServers`` (None: the request passed none)."""
    if servers is None:
        return None
    return parse_mcp_servers([server.model_dump(by_alias=True, exclude_none=True) for server in servers])


def mcp_meta(entry: SessionEntry) -> dict[str, Any]:
    """``{"_meta": {"acpServer": {"mcpServers": [...]}}}`` for a session with MCP servers; else ``{}``."""
    status = entry.mcp_status()
    return {"_meta": {"acpServer": {"mcpServers": status}}} if status else {}
