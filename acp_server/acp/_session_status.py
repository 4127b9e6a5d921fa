"""ACP's unstable ``session/status`` and ``session/set_title`` (``sessionCapabilities.status`` / ``title``): where a
session is, without touching it, and a title set under ACP's name for any stored session."""

from __future__ import annotations

from typing import Any, Literal

from ..bridge import SessionBridge, SessionNotFoundError
from ..errors import InvalidInputError
from ._params import check_set_title

__all__ = ["check_session_title", "in_memory", "retitle_stored", "session_status"]


def _refuse(method: str, field: str, problem: str) -> InvalidInputError:
    return InvalidInputError.for_field(field, problem, f"Invalid params for {method}: {field}: {problem}")


def check_session_title(params: Any) -> tuple[str, str]:
    """``{sessionId, title}`` of ``session/set_title``: as the extension's, but a title empty once trimmed is
    refused (ACP: the agent rejects it)."""
    session_id, title = check_set_title(params)
    if not title:
        raise _refuse("session/set_title", "title", "must not be empty")
    return session_id, title


def in_memory(bridge: SessionBridge, session_id: str) -> bool:
    """Whether this process has the session in memory (attached, for any connection)."""
    return any(entry.session_id == session_id for entry in bridge.sessions)


async def retitle_stored(bridge: SessionBridge, session_id: str, title: str) -> None:
    """Store the title of a session this process does not have in memory; unknown: ``session_not_found``."""
    if await bridge.store.get_session(session_id) is None:
        raise SessionNotFoundError(session_id)
    await bridge.store.set_title(session_id, title)


async def session_status(bridge: SessionBridge, params: Any) -> Literal["open", "saved"]:
    """``open`` (in memory), ``saved`` (stored only) or ``session_not_found``; nothing is loaded, attached or
    changed."""
    session_id = params.get("sessionId") if isinstance(params, dict) else None
    if not isinstance(session_id, str) or not session_id:
        raise _refuse("session/status", "sessionId", "must be a non-empty string")
    if in_memory(bridge, session_id):
        return "open"
    if await bridge.store.get_session(session_id) is None:
        raise SessionNotFoundError(session_id)
    return "saved"
