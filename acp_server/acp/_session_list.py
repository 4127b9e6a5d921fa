"""``session/list``: stored sessions of their own, a page at a time; or, with ``_meta.acpServer.parentId``, the
subagent children of that session (each a ``task`` call's session, never listed otherwise).

Invariant: a child appears only in its parent's list, with ``_meta.acpServer.parentId`` naming the parent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ._params import invalid_params
from ._replies import session_info

if TYPE_CHECKING:
    from acp.schema import ListSessionsRequest

    from ..bridge import SessionBridge

__all__ = ["list_reply"]


def _parent_of(meta: Any) -> str | None:
    """``_meta.acpServer.parentId`` of a ``session/list`` request (None: not given); not a string: invalid params."""
    ours = meta.get("acpServer") if isinstance(meta, dict) else None
    parent = ours.get("parentId") if isinstance(ours, dict) else None
    if parent is not None and not isinstance(parent, str):
        with invalid_params("session/list"):
            raise InvalidInputError.for_field("_meta.acpServer.parentId", "must be a session id (a string)")
    return parent


async def list_reply(bridge: SessionBridge, request: ListSessionsRequest) -> dict[str, Any]:
    """The ``session/list`` answer: a page of sessions, or all the children of ``_meta.acpServer.parentId``."""
    parent = _parent_of(request.field_meta)
    if parent is not None:  # one page, oldest first: a session's children are as many as its task calls
        children = await bridge.store.list_children(parent)
        return {"sessions": [session_info(record) for record in children]}
    page = await bridge.list_sessions(cwd=request.cwd, cursor=request.cursor)
    reply: dict[str, Any] = {"sessions": [session_info(record) for record in page.sessions]}
    if page.next_cursor is not None:
        reply["nextCursor"] = page.next_cursor
    return reply
