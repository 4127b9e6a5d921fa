"""Where the session database lives, and the one function a face calls to get a store."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from ._base import SessionStore
from ._memory import MemorySessionStore
from ._sqlite import SqliteSessionStore

__all__ = ["DATABASE_NAME", "STORE_URL_SCHEMES", "check_store_url", "default_state_dir", "open_store"]

DATABASE_NAME = "sessions.db"

STORE_URL_SCHEMES = ("postgresql://", "postgres://")
"""The URLs ``--store`` takes: a PostgreSQL connection URI (libpq's two spellings)."""


def check_store_url(url: str) -> str:
    """``url`` stripped, if it names a store this server can open; else a ``ValueError`` that never repeats it
    (it may hold a password)."""
    url = url.strip()
    if not url.lower().startswith(STORE_URL_SCHEMES):
        raise ValueError("must be a postgresql:// URL (without --store, sessions are kept in SQLite)")
    if not postgres_available():
        raise ValueError(POSTGRES_EXTRA_MISSING)
    return url


POSTGRES_EXTRA_MISSING = (
    "the PostgreSQL store needs the postgres extra, which is not installed: pip install 'acp-server[postgres]' "
    "(uv tool install 'acp-server[postgres]')"
)
"""Why a ``--store`` is refused when psycopg, an optional dependency (the ``postgres`` extra), is missing."""


def postgres_available() -> bool:
    """psycopg (the ``postgres`` extra) can be imported; it is not imported here (found, not loaded)."""
    return importlib.util.find_spec("psycopg") is not None


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/acp-server``, or ``~/.local/state/acp-server`` (a relative XDG value is ignored, per spec)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / "acp-server"


def open_store(
    state_dir: str | os.PathLike[str] | None,
    *,
    persist: bool = True,
    busy_timeout_ms: int = 5000,
    url: str | None = None,
) -> SessionStore:
    """The session store for a face, not yet opened: use it as ``async with open_store(...) as store``.

    ``persist=False`` (``--no-persist``) gives the in-memory store and ignores ``state_dir`` and ``url``; a ``url``
    (``--store postgresql://…``, see :func:`check_store_url`) gives the PostgreSQL store; otherwise the database is
    ``<state_dir or default_state_dir()>/sessions.db``. Nothing touches the disk or the network before the store is
    entered, and entering it never raises for a bad database (see ``SessionStore.problem``).
    """
    if not persist:
        return MemorySessionStore()
    if url is not None:
        from ._postgres import PostgresSessionStore  # psycopg is imported only by those who use it

        return PostgresSessionStore(check_store_url(url))
    directory = Path(state_dir).expanduser() if state_dir is not None else default_state_dir()
    return SqliteSessionStore(directory / DATABASE_NAME, busy_timeout_ms=busy_timeout_ms)
