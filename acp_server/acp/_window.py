"""What a new session is told when its model's window cannot hold a prompt beside its instructions and tools: a
``notice`` (``error``) for a client that shows notices, else an agent message, as before."""

from __future__ import annotations

import logging
from typing import Any
from uuid import uuid4

from ..bridge import SessionBridge, SessionEntry
from ..domain import Notice
from ._convert import notice_update

__all__ = ["window_problem_update"]

logger = logging.getLogger("acp_server.acp")


async def window_problem_update(bridge: SessionBridge, entry: SessionEntry, notices: bool) -> dict[str, Any] | None:
    """The ``session/update`` params that tell it (None: the window is fine or unknown). The check is advice: it
    never fails ``session/new`` (an error is logged, nothing told)."""
    try:
        problem = await bridge.window_problem(entry)
    except Exception:
        logger.exception("session %s: could not check its model's context window", entry.session_id)
        return None
    if problem is None:
        return None
    update: dict[str, Any]
    if notices:
        title = "The model's context window is too small for this session"
        update = notice_update(Notice("error", title, str(problem)))
    else:
        content = {"type": "text", "text": f"{problem}\n\n"}
        message_id = f"{entry.session_id}/window-{uuid4().hex}"
        update = {"sessionUpdate": "agent_message_chunk", "content": content, "messageId": message_id}
    return {"sessionId": entry.session_id, "update": update}
