"""Session modes: which tools the model is offered and which calls need the user's permission (ground floor: the
bridge stores a session's mode, the turn applies it, every face offers it).

=====================  =========================================  ==================================
mode                   offered tools                              asks before
=====================  =========================================  ==================================
``default``            all                                        every edit and every command
``accept-edits``       all                                        every command (edits run at once)
``read-only``          read_file, list_directory, glob, grep      nothing (nothing can change)
``bypass-permissions`` all                                        nothing (only when the server allows it)
=====================  =========================================  ==================================

A session's "always" answers (``allow_always`` / ``reject_always``, per tool kind; per tool for an MCP server's)
apply on top of the mode. An MCP server's tool counts as a read tool when annotated ``readOnlyHint``, else as a
command (``acp_server.tools.registry`` holds the offer rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["BYPASS_MODE", "DEFAULT_MODE", "MODES", "READ_ONLY_MODE", "Mode", "available_modes", "needs_asking"]


@dataclass(frozen=True, slots=True)
class Mode:
    id: str
    name: str
    description: str


DEFAULT_MODE = "default"
READ_ONLY_MODE = "read-only"
BYPASS_MODE = "bypass-permissions"

MODES: Mapping[str, Mode] = {
    mode.id: mode
    for mode in (
        Mode("default", "Default", "Ask before every edit and every command"),
        Mode("accept-edits", "Accept edits", "Edit files without asking; ask before every command"),
        Mode(READ_ONLY_MODE, "Read only", "Read and search only: no edits, no commands"),
        Mode(BYPASS_MODE, "Bypass permissions", "Edit files and run commands without asking"),
    )
}


def available_modes(*, allow_bypass: bool) -> tuple[Mode, ...]:
    """The modes a session may switch to; ``bypass-permissions`` only when the server was started allowing it."""
    return tuple(mode for mode in MODES.values() if allow_bypass or mode.id != BYPASS_MODE)


def needs_asking(mode: str, kind: str) -> bool:
    """Whether a call of ``kind`` that changes something waits for the user's permission in ``mode``."""
    if mode == BYPASS_MODE:
        return False
    if mode == "accept-edits":
        return kind != "edit"
    return True
