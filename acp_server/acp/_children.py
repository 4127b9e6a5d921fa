"""Subagents as their own sessions, for a client that advertised ACP's unstable ``subagents`` capability.

Invariants: a child's ``subagent_update`` (on the parent's session, after the parent's earlier updates were
delivered) goes out before any update or request under the child's session id; the child's updates are converted as
the parent's would be for this client (:func:`live_update`); its permission requests name the child's session id.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..domain import ToolCallStarted, TurnEvent, UsageReported
from ..tools import PermissionAsker, PermissionChoice, ToolClient
from ._editor import AcpEditor, ClientCapabilities
from ._relay import live_update

if TYPE_CHECKING:
    from ._peer import Peer

__all__ = ["AcpChildren", "with_children"]


def with_children(client: ToolClient, editor: AcpEditor, peer: Peer, caps: ClientCapabilities) -> ToolClient:
    """``client`` with the children's face when the client advertised ``subagents`` (else as it is)."""
    if not caps.subagents:
        return client
    return dataclasses.replace(client, children=AcpChildren(editor, peer, editor.session_id, caps))


class AcpChildren:
    """The :class:`~acp_server.tools.ChildFace` of one prompt over its connection."""

    def __init__(self, editor: AcpEditor, peer: Peer, session_id: str, caps: ClientCapabilities) -> None:
        self._editor = editor
        self._peer = peer
        self._session_id = session_id
        self._caps = caps
        self._fs_timeout_ms = editor.fs_timeout_ms

    async def announce(self, child_id: str, description: str) -> None:
        if self._editor.stream is not None:
            await self._editor.stream.wait_delivered()  # after the parent's tool_call of the task
        update = {"sessionUpdate": "subagent_update", "sessionId": child_id, "title": description}
        await self._peer.notify("session/update", {"sessionId": self._session_id, "update": update})

    async def update(self, child_id: str, event: TurnEvent) -> None:
        if isinstance(event, UsageReported):
            return  # a child's window is its own business: the parent's usage tells what the user pays
        told = live_update(child_id, event, self._caps)
        if told is not None:
            await self._peer.notify("session/update", told)

    def asker(self, child_id: str) -> PermissionAsker:
        return _ChildAsker(AcpEditor(self._peer, child_id, fs_timeout_ms=self._fs_timeout_ms))


class _ChildAsker:
    """Asks under the child's session id (its updates were sent directly: nothing to wait for)."""

    def __init__(self, editor: AcpEditor) -> None:
        self._editor = editor

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
        return await self._editor.request_permission(call)
