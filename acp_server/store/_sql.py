"""The session store's column lists, filters and read statements, apart from its transactions (``_sqlite.py``; the
PostgreSQL store runs the same through its dialect adapter), and the helpers that turn their rows into records."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..domain import Compaction
from ..system_prompts import ClientPrompt
from ._types import JournalRow, SessionRecord, cwd_key, directories_from_json, steps_json_from_journal

__all__ = [
    "LATEST_COMPACTION",
    "MESSAGES_AFTER",
    "MESSAGE_COLUMNS",
    "OWN_PENDING_ANSWER",
    "PENDING",
    "SESSION_COLUMNS",
    "SESSION_ROW",
    "STILL_OWNED",
    "TURN_HEAD",
    "TURN_MESSAGES",
    "by_seq",
    "compaction_of",
    "delete_rows",
    "journaled_steps",
    "page_query",
    "record_of",
]

SESSION_COLUMNS = "id, cwd, title, created_us, updated_us, mode, model, additional_directories"
SESSION_ROW = f"{SESSION_COLUMNS}, system_prompt, task_of"  # what a read selects: the columns at creation, then these
MESSAGE_COLUMNS = "seq, role, content, reasoning, parts, stop_reason, outcome, owner, steps, usage"
OWN_PENDING_ANSWER = "session_id = ? AND seq = ? AND outcome = 'pending' AND owner = ?"
"""The answer of a turn this store is running: a write with this filter that changes no row was refused."""
STILL_OWNED = f"EXISTS (SELECT 1 FROM messages WHERE {OWN_PENDING_ANSWER})"
"""Guards the other writes of the transaction that ends an answer, so that none waits for its rowcount."""
TURN_HEAD = (
    "SELECT s.title, coalesce((SELECT seq FROM messages WHERE session_id = s.id ORDER BY seq DESC LIMIT 1), 0), "
    "c.through, c.summary "
    "FROM sessions s LEFT JOIN compactions c ON c.session_id = s.id "
    "AND c.through = (SELECT max(through) FROM compactions WHERE session_id = s.id) WHERE s.id = ?"
)
"""What a turn starts from, in one read: the title, the last seq and the latest compaction (or NULLs)."""
TURN_MESSAGES = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq > ? UNION ALL "
    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND outcome = 'pending'"
)
"""The messages a turn catches up on, then the pending answers (running, or left by a dead process), in one read of
two index searches each in its own order (a pending answer among the news comes twice: see :func:`by_seq`)."""
PENDING = "SELECT seq, owner FROM messages WHERE session_id = ? AND outcome = 'pending'"  # (seq, owner) of each
LATEST_COMPACTION = "SELECT through, summary FROM compactions WHERE session_id = ? ORDER BY through DESC LIMIT 1"
MESSAGES_AFTER = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq"


def journaled_steps(conn: sqlite3.Connection, session_id: str, seq: int) -> str | None:
    """The steps JSON of a pending answer's call journal (None when it has none)."""
    rows: list[JournalRow] = conn.execute(
        "SELECT step, head, call FROM answer_calls WHERE session_id = ? AND seq = ? ORDER BY n", (session_id, seq)
    ).fetchall()
    return steps_json_from_journal(rows)


def by_seq(rows: Any) -> list[Any]:
    """Message rows in ``seq`` order, each once."""
    return [row for _seq, row in sorted({row[0]: row for row in rows.fetchall()}.items())]


def compaction_of(row: Any) -> Compaction | None:  # a LATEST_COMPACTION row, or None
    return None if row is None else Compaction(row[0], row[1])


def record_of(row: Any) -> SessionRecord:
    prompt = ClientPrompt.from_json(row[8])
    directories = directories_from_json(row[7])
    return SessionRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6], directories, prompt, row[9])


def page_query(cwd: str | None, after: tuple[int, str] | None, limit: int) -> tuple[str, list[object]]:
    """A page of ``list_sessions``: sessions of their own (a subagent child is listed only under its parent), of
    ``cwd`` if given (compared normalised, so no index: a full scan of a small table), after the cursor ``after``;
    one row more than ``limit`` (tells whether a next page exists)."""
    clauses: list[str] = ["task_of IS NULL"]
    params: list[object] = []
    if cwd is not None:
        clauses.append("acp_cwd_key(cwd) = ?")
        params.append(cwd_key(cwd))
    if after is not None:
        clauses.append("(updated_us, id) < (?, ?)")
        params.extend(after)
    params.append(limit + 1)
    where = " AND ".join(clauses)
    return f"SELECT {SESSION_ROW} FROM sessions WHERE {where} ORDER BY updated_us DESC, id DESC LIMIT ?", params


def delete_rows(conn: sqlite3.Connection, session_ids: list[str]) -> None:
    """Remove sessions with their whole histories (dependent rows first: no cascade relied on)."""
    for table in ("answer_calls", "compactions", "rewinds", "messages"):
        conn.executemany(f"DELETE FROM {table} WHERE session_id = ?", [(sid,) for sid in session_ids])
    conn.executemany("DELETE FROM sessions WHERE id = ?", [(sid,) for sid in session_ids])
