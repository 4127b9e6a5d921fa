"""Durable sessions: a SQLite store (the only place with SQL) and an in-memory one with the same contract.

async with open_store(state_dir, persist=True) as store:   # never raises for a bad database file
    bridge = SessionBridge(runner, store=store)
"""

from ._base import SessionStore
from ._exceptions import (
    InvalidCursorError,
    SessionBusyError,
    StoreBusyError,
    StoreClosedError,
    StoredSessionNotFoundError,
    StoreError,
    StoreIOError,
    StoreUnavailableError,
)
from ._memory import MemorySessionStore
from ._open import DATABASE_NAME, check_store_url, default_state_dir, open_store
from ._sqlite import SCHEMA_VERSION, SqliteSessionStore
from ._types import (
    DEFAULT_PAGE_SIZE,
    Rewind,
    SessionPage,
    SessionRecord,
    SessionSnapshot,
    StoredMessage,
    TurnTicket,
)

__all__ = [
    "DATABASE_NAME",
    "DEFAULT_PAGE_SIZE",
    "SCHEMA_VERSION",
    "InvalidCursorError",
    "MemorySessionStore",
    "Rewind",
    "SessionBusyError",
    "SessionPage",
    "SessionRecord",
    "SessionSnapshot",
    "SessionStore",
    "SqliteSessionStore",
    "StoreBusyError",
    "StoreClosedError",
    "StoreError",
    "StoreIOError",
    "StoreUnavailableError",
    "StoredMessage",
    "StoredSessionNotFoundError",
    "TurnTicket",
    "check_store_url",
    "default_state_dir",
    "open_store",
]
