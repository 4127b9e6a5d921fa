"""The SQLite store's schema: how a database file is opened, recognised and migrated forward, and the two
transaction shapes every call uses. With ``_sqlite.py``, the only modules of acp-server that contain SQL.

Opening never writes to a file it does not recognise: a file that is not a database, a database of another
application, a schema newer than ours or unreadable tables make the store unavailable and leave the bytes as they
were. Only our own (or a brand-new, empty) database is switched to WAL and migrated forward, in one transaction
with the version bump; a released migration step is never edited (a new one is appended).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ._exceptions import StoreUnavailableError, UnavailableReason
from ._rewinds import REWINDS_TABLE
from ._types import cwd_key

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "connect", "prepare", "read", "write"]

Unavailable = Callable[[UnavailableReason, str], StoreUnavailableError]
"""Makes the error of a file the store cannot use (it names the file)."""

APPLICATION_ID = 0x41435053  # "ACPS" in the database header: tells our files from any other SQLite file

# Forward migrations: MIGRATIONS[i] takes a database from version i to i + 1 (statements, run in one
# transaction with the version bump). Never edit a released step; append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE sessions (
            id          TEXT PRIMARY KEY,
            cwd         TEXT NOT NULL,
            title       TEXT NOT NULL DEFAULT '',
            created_us  INTEGER NOT NULL,
            updated_us  INTEGER NOT NULL,
            parent_id   TEXT
        )""",
        "CREATE INDEX sessions_by_update ON sessions (updated_us DESC, id DESC)",
        "CREATE INDEX sessions_by_cwd_update ON sessions (cwd, updated_us DESC, id DESC)",
        """CREATE TABLE messages (
            session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq         INTEGER NOT NULL CHECK (seq > 0),
            role        TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content     TEXT NOT NULL,
            reasoning   TEXT NOT NULL DEFAULT '',
            parts       TEXT,
            stop_reason TEXT,
            outcome     TEXT NOT NULL
                        CHECK (outcome IN ('complete', 'failed', 'cancelled', 'interrupted', 'pending')),
            owner       TEXT,
            created_us  INTEGER NOT NULL,
            updated_us  INTEGER NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        "CREATE INDEX messages_pending ON messages (session_id) WHERE outcome = 'pending'",
    ),
    (  # 2: an answer's tool steps (JSON, see _types.steps_to_json) and the session's mode
        "ALTER TABLE messages ADD COLUMN steps TEXT",
        "ALTER TABLE sessions ADD COLUMN mode TEXT",
    ),
    ("ALTER TABLE sessions ADD COLUMN model TEXT",),  # 3: the session's model
    (  # 4: the call journal of a running answer (one row per finished call; see record_steps)
        """CREATE TABLE answer_calls (
            session_id  TEXT NOT NULL,
            seq         INTEGER NOT NULL,
            n           INTEGER NOT NULL CHECK (n >= 0),
            step        INTEGER NOT NULL CHECK (step >= 0),
            head        TEXT,
            call        TEXT,
            PRIMARY KEY (session_id, seq, n),
            FOREIGN KEY (session_id, seq) REFERENCES messages (session_id, seq) ON DELETE CASCADE
        )""",
    ),
    (  # 5: an answer's context usage (JSON, see _types.usage_to_json) and the compactions of a session
        "ALTER TABLE messages ADD COLUMN usage TEXT",
        """CREATE TABLE compactions (
            session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            through     INTEGER NOT NULL CHECK (through > 0),
            summary     TEXT NOT NULL,
            created_us  INTEGER NOT NULL,
            PRIMARY KEY (session_id, through)
        )""",
    ),
    ("ALTER TABLE sessions ADD COLUMN additional_directories TEXT",),  # 6: JSON array of the extra roots
    (REWINDS_TABLE,),  # 7: the conversation's rewinds (/rewind)
    ("ALTER TABLE sessions ADD COLUMN system_prompt TEXT",),  # 8: the client's system prompt (JSON, ClientPrompt)
    (  # 9: a subagent child names the session whose task call ran it (listed only under it, deleted with it)
        "ALTER TABLE sessions ADD COLUMN task_of TEXT",
        "CREATE INDEX sessions_by_task_of ON sessions (task_of, created_us) WHERE task_of IS NOT NULL",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, the lock taken up front; rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def read(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every SELECT inside sees the same committed snapshot."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")



def prepare(conn: sqlite3.Connection, busy_timeout_ms: int, unavailable: Unavailable) -> None:
    """Recognise the file before writing anything to it; then WAL, pragmas, forward migrations."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if application_id != APPLICATION_ID and (application_id != 0 or version != 0 or tables):
        raise unavailable("not_ours", "this SQLite database belongs to another application")
    if version > SCHEMA_VERSION:
        raise unavailable(
            "schema_too_new",
            f"its schema version {version} is newer than this acp-server supports ({SCHEMA_VERSION}); "
            "upgrade acp-server",
        )
    if version >= 1 and not {"sessions", "messages"} <= tables:
        raise unavailable("corrupt", f"tables are missing from a version {version} database")
    if version >= 1:
        conn.execute("SELECT count(*) FROM sessions").fetchone()  # reads the table's root page
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise unavailable("cannot_open", f"cannot use write-ahead logging (journal_mode={mode})")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if version < SCHEMA_VERSION:
        _migrate(conn, unavailable)


def _migrate(conn: sqlite3.Connection, unavailable: Unavailable) -> None:
    with write(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have done it
        if version > SCHEMA_VERSION:
            raise unavailable("schema_too_new", f"its schema version {version} is newer than ours")
        for step in MIGRATIONS[version:]:
            for statement in step:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def connect(path: Path, busy_timeout_ms: int, unavailable: Unavailable) -> sqlite3.Connection:
    """The store's one connection to ``path``, recognised and prepared (:func:`prepare`); any problem is the
    :class:`StoreUnavailableError` ``unavailable`` makes, the file untouched."""
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        detail = f"cannot create the directory {directory} ({exc.strerror})"
        raise unavailable("cannot_open", detail) from None
    exists = path.exists()
    if exists and not path.is_file():
        raise unavailable("cannot_open", "not a regular file")
    if exists and not os.access(path, os.R_OK):
        raise unavailable("cannot_open", "the file is not readable (permissions)")
    if exists and not os.access(path, os.W_OK):
        raise unavailable("read_only", "the file is read-only")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise unavailable(
            "read_only",
            f"the directory {directory} is not writable (SQLite keeps {path.name}-wal and {path.name}-shm there)",
        )
    try:
        conn = sqlite3.connect(
            path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise unavailable("cannot_open", f"cannot open the file ({exc})") from None
    conn.create_function("acp_cwd_key", 1, cwd_key, deterministic=True)
    try:
        prepare(conn, busy_timeout_ms, unavailable)
    except sqlite3.Error as exc:
        conn.close()
        name = getattr(exc, "sqlite_errorname", "") or ""
        if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            raise unavailable("corrupt", f"not a usable SQLite database ({exc})") from None
        if name.startswith("SQLITE_READONLY"):
            raise unavailable("read_only", f"cannot write ({exc})") from None
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            detail = f"locked by another process for more than {busy_timeout_ms} ms ({exc})"
            raise unavailable("cannot_open", detail) from None
        raise unavailable("cannot_open", str(exc)) from None
    except BaseException:
        conn.close()
        raise
    return conn
