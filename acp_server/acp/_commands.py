"""The slash commands as ACP advertises them: one ``available_commands_update``, sent right after the answer that
makes a session known to the client (``session/new``, ``load``, ``resume``, ``fork``), never before it (a client
drops an update for a session it does not know yet); another whenever the session's commands change later (its MCP
servers' prompts listed late, re-listed, gone or back), run after what is already queued (:func:`after_queued`: an
answer whose handler has returned is written first)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from ..commands import Command

__all__ = ["after_queued", "commands_update"]


def _wire(command: Command) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": command.name, "description": command.description}
    if command.hint is not None:
        entry["input"] = {"hint": command.hint}
    return entry


def commands_update(session_id: str, commands: Iterable[Command]) -> dict[str, Any]:
    """The ``session/update`` params announcing ``commands`` for the session."""
    update = {"sessionUpdate": "available_commands_update", "availableCommands": [_wire(c) for c in commands]}
    return {"sessionId": session_id, "update": update}


def after_queued(call: Callable[[], None]) -> None:
    """Run ``call`` once the event loop has run what is already scheduled (a returned handler's reply is written by
    such a callback); at once outside a running loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        call()
        return
    loop.call_soon(call)
