"""The conversation's rewinds in SQL (SQLite's spelling; the PostgreSQL store translates it): the table, and the
statements the SQL stores share to record, read, copy and delete them."""

from __future__ import annotations

from typing import Any

from ._types import Rewind

__all__ = ["REWINDS", "REWINDS_TABLE", "copy_rewinds", "insert_rewind", "rewinds_of"]

REWINDS_TABLE = """CREATE TABLE rewinds (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    start       INTEGER NOT NULL CHECK (start > 0),
    through     INTEGER NOT NULL,
    created_us  INTEGER NOT NULL,
    PRIMARY KEY (session_id, through)
)"""

REWINDS = "SELECT start, through FROM rewinds WHERE session_id = ? ORDER BY through"


def rewinds_of(rows: list[Any]) -> tuple[Rewind, ...]:
    return tuple(Rewind(int(start), int(through)) for start, through in rows)


def insert_rewind(conn: Any, session_id: str, rewind: Rewind, now: int) -> None:
    """Record ``rewind`` (a rewind through the same message again replaces it: a rerun after a kill)."""
    conn.execute("DELETE FROM rewinds WHERE session_id = ? AND through = ?", (session_id, rewind.through))
    conn.execute(
        "INSERT INTO rewinds (session_id, start, through, created_us) VALUES (?, ?, ?, ?)",
        (session_id, rewind.start, rewind.through, now),
    )


def copy_rewinds(conn: Any, source_id: str, session_id: str) -> None:
    conn.execute(
        "INSERT INTO rewinds (session_id, start, through, created_us) "
        "SELECT ?, start, through, created_us FROM rewinds WHERE session_id = ?",
        (session_id, source_id),
    )
