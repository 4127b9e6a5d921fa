"""Where the session database lives, and the one function a face calls to get a store."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ._base import SessionStore
from ._memory import MemorySessionStore
from ._sqlite import SqliteSessionStore

__all__ = ["DATABASE_NAME", "default_state_dir", "open_store"]

DATABASE_NAME = "sessions.db"


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/acp-server``, or ``~/.local/state/acp-server`` (a relative XDG value is ignored, per spec)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / "acp-server"


def open_store(
    state_dir: str | os.PathLike[str] | None, *, persist: bool = True, busy_timeout_ms: int = 5000
) -> SessionStore:
    """The session store for a face, not yet opened: use it as ``async with open_store(...) as store``.

    ``persist=False`` (``--no-persist``) gives the in-memory store and ignores ``state_dir``; otherwise the database
    is ``<state_dir or default_state_dir()>/sessions.db``. Nothing touches the disk before the store is entered, and
    entering it never raises for a bad database (see ``SessionStore.problem``).
    """
    if not persist:
        return MemorySessionStore()
    directory = Path(state_dir).expanduser() if state_dir is not None else default_state_dir()
    return SqliteSessionStore(directory / DATABASE_NAME, busy_timeout_ms=busy_timeout_ms)
