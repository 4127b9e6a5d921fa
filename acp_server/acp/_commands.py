"""The slash commands as ACP advertises them: one ``available_commands_update``, sent right after the answer that
makes a session known to the client (``session/new``, ``load``, ``resume``, ``fork``), never before it (a client
drops an update for a session it does not know yet)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..bridge import Command

__all__ = ["commands_update"]


def _wire(command: Command) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": command.name, "description": command.description}
    if command.hint is not None:
        entry["input"] = {"hint": command.hint}
    return entry


def commands_update(session_id: str, commands: Iterable[Command]) -> dict[str, Any]:
    """The ``session/update`` params announcing ``commands`` for the session."""
    update = {"sessionUpdate": "available_commands_update", "availableCommands": [_wire(c) for c in commands]}
    return {"sessionId": session_id, "update": update}
