"""The editor side of an MCP server's elicitation: ACP ``elicitation/create`` to the connection that opened the session.

A client that advertised ``clientCapabilities.elicitation`` (``form: {}`` and/or ``url: {}``) gets an
:class:`AcpElicitor` for each request it sends (``acp._methods``); :func:`opened` makes it the elicitor of the
sessions a request opens (``session/new``, ``load``, ``resume``, ``fork``: their MCP servers), so the connection
that opened a session's MCP servers answers their elicitations.
The request carries the ``sessionId`` (session scope); its wait is bounded by ``--fs-request-timeout-ms``, the bound
of every request that waits on the editor (then the server is told ``cancel``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from ..mcp import SESSION_ELICITOR

if TYPE_CHECKING:
    from ._peer import Peer

__all__ = ["AcpElicitor", "elicitation_modes", "opened", "session_elicitor"]

_T = TypeVar("_T")


def elicitation_modes(capabilities: object) -> frozenset[str]:
    """The modes ``clientCapabilities`` advertised (``elicitation.form`` / ``.url`` an object); malformed: none."""
    caps = capabilities if isinstance(capabilities, dict) else {}
    elicitation = caps.get("elicitation")
    if not isinstance(elicitation, dict):
        return frozenset()
    return frozenset(mode for mode in ("form", "url") if isinstance(elicitation.get(mode), dict))


class AcpElicitor:
    """An :class:`~acp_server.mcp.Elicitor` over ``peer``, for the modes the client advertised."""

    def __init__(self, peer: Peer, modes: frozenset[str], timeout_ms: int) -> None:
        self._peer = peer
        self.modes = modes
        self.timeout_s = timeout_ms / 1000

    async def elicit(self, session_id: str, params: dict[str, Any]) -> object:
        return await self._peer.request("elicitation/create", {"sessionId": session_id, **params})


def session_elicitor(peer: Peer, modes: frozenset[str], timeout_ms: int) -> AcpElicitor | None:
    """The elicitor over ``peer`` of a client that advertised ``modes`` (None: no elicitation mode)."""
    return AcpElicitor(peer, modes, timeout_ms) if modes else None


async def opened(elicitor: AcpElicitor | None, opening: Awaitable[_T]) -> _T:
    """Await ``opening`` (a bridge call that opens a session) with ``elicitor`` for the MCP servers it connects."""
    token = SESSION_ELICITOR.set(elicitor)
    try:
        return await opening
    finally:
        SESSION_ELICITOR.reset(token)
