"""The SQLite session store: with its schema (``_schema.py``) and shared statements (``_sql.py``), the only modules
of acp-server that contain SQL.

Concurrency design:
- One connection per store, used by one thread at a time: every call runs in anyio's worker threads behind a
  ``CapacityLimiter(1)`` (the sqlite3 connection is opened with ``check_same_thread=False``). SQLite admits one
  writer per database anyway, so a second connection would only add lock waits inside our own process; with one,
  our transactions can never interleave or deadlock each other, and there is no per-thread connection to track in
  a thread pool whose threads come and go. The event loop thread never blocks on SQLite.
- Calls are not abandoned on cancellation (``to_thread.run_sync`` waits for the thread): a transaction that started
  is committed or rolled back before the caller sees the cancellation.
- Between processes: WAL (readers never block the writer and see only committed transactions), writes start with
  ``BEGIN IMMEDIATE`` (the write lock is taken up front, so two writers never deadlock on an upgrade), and
  ``busy_timeout`` bounds the wait for another process's write.
- ``synchronous=NORMAL``: a commit survives a crash or kill -9 of the process; a power cut may lose the last
  commits but never corrupts the database.

Opening (``_schema.connect``) never writes to a file it does not recognise.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ..domain import Compaction, ContextUsage, ModelStep, Outcome, PromptPart, StopReason
from ..system_prompts import ClientPrompt
from ._base import SessionStore
from ._exceptions import (
    StoreBusyError,
    StoreClosedError,
    StoredSessionNotFoundError,
    StoreError,
    StoreIOError,
    StoreUnavailableError,
    UnavailableReason,
)
from ._rewinds import REWINDS, copy_rewinds, insert_rewind, rewinds_of
from ._schema import APPLICATION_ID, SCHEMA_VERSION, connect
from ._schema import read as _read
from ._schema import write as _write
from ._sql import (
    LATEST_COMPACTION,
    MESSAGE_COLUMNS,
    MESSAGES_AFTER,
    OWN_PENDING_ANSWER,
    PENDING,
    SESSION_COLUMNS,
    SESSION_ROW,
    STILL_OWNED,
    TURN_HEAD,
    TURN_MESSAGES,
    by_seq,
    compaction_of,
    delete_rows,
    journaled_steps,
    page_query,
    record_of,
)
from ._types import (
    DEFAULT_PAGE_SIZE,
    FinalOutcome,
    Rewind,
    SessionPage,
    SessionRecord,
    SessionSnapshot,
    StoredMessage,
    TurnTicket,
    decode_cursor,
    directories_to_json,
    encode_cursor,
    journal_length,
    journal_rows,
    parts_from_json,
    parts_to_json,
    steps_from_json,
    steps_to_json,
    usage_from_json,
    usage_to_json,
)

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SqliteSessionStore"]

T = TypeVar("T")

class SqliteSessionStore(SessionStore):
    """Sessions in ``<state dir>/sessions.db``. See the module docstring for the threading and locking design."""

    persistent = True

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5000) -> None:
        super().__init__()
        self._path = Path(path)
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._journaled: dict[tuple[str, int], int] = {}  # journal rows written per running answer

    @property
    def location(self) -> str:
        return str(self._path)

    # -- plumbing --------------------------------------------------------------------------------------------

    async def _open(self) -> StoreUnavailableError | None:
        self._limiter = anyio.CapacityLimiter(1)
        try:
            self._conn = await anyio.to_thread.run_sync(self._open_sync, limiter=self._limiter)
        except StoreUnavailableError as exc:
            return exc
        return None

    async def _close(self) -> None:
        if self._limiter is None:
            return

        def close() -> None:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(close, limiter=self._limiter)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in a worker thread, alone on the connection; map sqlite3 errors once."""
        self._check()
        assert self._limiter is not None

        def run() -> T:
            conn = self._conn
            if conn is None:  # closed while this call waited for the connection
                raise StoreClosedError()
            return fn(conn, *args)

        try:
            return await anyio.to_thread.run_sync(run, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise self._map_error(exc) from exc

    def _map_error(self, exc: sqlite3.Error) -> StoreError:
        """The one mapping of sqlite3 failures after opening; corruption makes the store unavailable for good."""
        name = getattr(exc, "sqlite_errorname", "") or ""
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return StoreBusyError(self.location, self._busy_timeout_ms)
        if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            self._mark_unavailable(StoreUnavailableError(self.location, "corrupt", f"the database is damaged ({exc})"))
            assert self._problem is not None
            return self._problem
        return StoreIOError(self.location, str(exc))

    def _unavailable(self, reason: UnavailableReason, detail: str) -> StoreUnavailableError:
        return StoreUnavailableError(self.location, reason, detail)

    def _open_sync(self) -> sqlite3.Connection:
        return connect(self._path, self._busy_timeout_ms, self._unavailable)

    # -- reading rows ----------------------------------------------------------------------------------------

    def _message(self, conn: sqlite3.Connection, session_id: str, row: Any) -> StoredMessage:
        seq, role, content, reasoning, parts, stop_reason, outcome, owner, steps, usage = row
        state: Outcome = self._pending_outcome(owner, session_id, seq) if outcome == "pending" else outcome
        if outcome == "pending":  # running (here or elsewhere) or dead: its steps so far are in its journal
            steps = journaled_steps(conn, session_id, seq) or steps
        return StoredMessage(
            seq,
            role,
            content,
            reasoning,
            parts_from_json(parts),
            stop_reason,
            state,
            steps_from_json(steps),
            usage_from_json(usage),
        )

    def _messages(self, conn: sqlite3.Connection, session_id: str, rows: list[Any]) -> tuple[StoredMessage, ...]:
        return tuple(self._message(conn, session_id, row) for row in rows)

    # -- sessions --------------------------------------------------------------------------------------------

    async def create_session(
        self, session_id: str, cwd: str, *, mode: str | None = None,
        additional_directories: tuple[str, ...] = (), task_of: str | None = None,
    ) -> SessionRecord:
        now = self._tick()
        directories = tuple(additional_directories)
        record = SessionRecord(session_id, cwd, "", now, now, mode, None, directories, None, task_of)

        def create(conn: sqlite3.Connection) -> None:
            with _write(conn):
                conn.execute(
                    f"INSERT INTO sessions ({SESSION_COLUMNS}, task_of) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                    (session_id, cwd, "", now, now, mode, directories_to_json(directories), task_of),
                )

        await self._call(create)
        return record

    async def get_session(self, session_id: str) -> SessionRecord | None:
        def get(conn: sqlite3.Connection) -> SessionRecord | None:
            row = conn.execute(f"SELECT {SESSION_ROW} FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return None if row is None else record_of(row)

        return await self._call(get)

    async def read_session(self, session_id: str) -> SessionSnapshot | None:
        def read(conn: sqlite3.Connection) -> SessionSnapshot | None:
            with _read(conn):  # the three reads sent together: one round trip to a database server
                head = conn.execute(f"SELECT {SESSION_ROW} FROM sessions WHERE id = ?", (session_id,))
                rows = conn.execute(MESSAGES_AFTER, (session_id, 0))
                compaction = conn.execute(LATEST_COMPACTION, (session_id,))
                rewinds = conn.execute(REWINDS, (session_id,))
                row = head.fetchone()
                if row is None:
                    return None
                messages = self._messages(conn, session_id, rows.fetchall())
                latest = compaction_of(compaction.fetchone())
                return SessionSnapshot(record_of(row), messages, latest, rewinds_of(rewinds.fetchall()))

        return await self._call(read)

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> SessionPage:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        query, params = page_query(cwd, decode_cursor(cursor) if cursor is not None else None, limit)

        def select(conn: sqlite3.Connection) -> list[SessionRecord]:
            return [record_of(row) for row in conn.execute(query, params)]

        records = await self._call(select)
        page = tuple(records[:limit])
        return SessionPage(page, encode_cursor(page[-1]) if len(records) > limit else None)

    async def list_children(self, session_id: str) -> tuple[SessionRecord, ...]:
        query = f"SELECT {SESSION_ROW} FROM sessions WHERE task_of = ? ORDER BY created_us, id"

        def select(conn: sqlite3.Connection) -> tuple[SessionRecord, ...]:
            return tuple(record_of(row) for row in conn.execute(query, (session_id,)))

        return await self._call(select)

    async def fork_session(
        self,
        source_id: str,
        session_id: str,
        *,
        cwd: str,
        mode: str | None = None,
        additional_directories: tuple[str, ...] = (),
    ) -> SessionRecord:
        now = self._tick()
        directories = tuple(additional_directories)

        def fork(conn: sqlite3.Connection) -> SessionRecord:
            with _write(conn):
                row = conn.execute("SELECT title, mode, model FROM sessions WHERE id = ?", (source_id,)).fetchone()
                if row is None:
                    raise StoredSessionNotFoundError(source_id)
                title, stored_mode, model = row
                child_mode = stored_mode if mode is None else mode
                conn.execute(
                    f"INSERT INTO sessions ({SESSION_COLUMNS}, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (session_id, cwd, title, now, now, child_mode, model, directories_to_json(directories), source_id),
                )
                conn.execute(
                    f"""INSERT INTO messages (session_id, {MESSAGE_COLUMNS}, created_us, updated_us)
                        SELECT ?, seq, role, content, reasoning, parts, stop_reason,
                               CASE outcome WHEN 'pending' THEN 'interrupted' ELSE outcome END,
                               NULL, steps, usage, created_us, ?
                        FROM messages WHERE session_id = ? ORDER BY seq""",
                    (session_id, now, source_id),
                )
                conn.execute(
                    "INSERT INTO compactions (session_id, through, summary, created_us) "
                    "SELECT ?, through, summary, created_us FROM compactions WHERE session_id = ?",
                    (session_id, source_id),
                )
                copy_rewinds(conn, source_id, session_id)
                pending = "SELECT seq FROM messages WHERE session_id = ? AND outcome = 'pending'"
                for (seq,) in conn.execute(pending, (source_id,)).fetchall():  # a turn running (or dead) there
                    journaled = journaled_steps(conn, source_id, seq)
                    if journaled is not None:
                        conn.execute(
                            "UPDATE messages SET steps = ? WHERE session_id = ? AND seq = ?",
                            (journaled, session_id, seq),
                        )
                return SessionRecord(session_id, cwd, title, now, now, child_mode, model, directories)

        return await self._call(fork)

    async def delete_session(self, session_id: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            with _write(conn):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise StoredSessionNotFoundError(session_id)
                self._refuse_running(session_id, conn.execute(PENDING, (session_id,)).fetchall())
                children = conn.execute("SELECT id FROM sessions WHERE task_of = ?", (session_id,)).fetchall()
                delete_rows(conn, [*(child for (child,) in children), session_id])  # its subagents go with it

        await self._call(delete)

    async def set_mode(self, session_id: str, mode: str) -> None:
        await self._set_column(session_id, "mode", mode)

    async def set_model(self, session_id: str, model: str | None) -> None:
        await self._set_column(session_id, "model", model)

    async def set_additional_directories(self, session_id: str, directories: tuple[str, ...]) -> None:
        await self._set_column(session_id, "additional_directories", directories_to_json(tuple(directories)))

    async def set_title(self, session_id: str, title: str) -> None:
        await self._set_column(session_id, "title", title)

    async def set_system_prompt(self, session_id: str, prompt: ClientPrompt | None) -> None:
        await self._set_column(session_id, "system_prompt", None if prompt is None else prompt.to_json())

    async def _set_column(self, session_id: str, column: str, value: str | None) -> None:
        """One setting of a session (``column`` is one of ours, never input), in one transaction."""
        statement = f"UPDATE sessions SET {column} = ? WHERE id = ?"

        def set_(conn: sqlite3.Connection) -> None:
            with _write(conn):
                if conn.execute(statement, (value, session_id)).rowcount != 1:
                    raise StoredSessionNotFoundError(session_id)

        await self._call(set_)

    # -- turns -----------------------------------------------------------------------------------------------

    async def begin_turn(
        self, session_id: str, *, known: int, content: str, parts: tuple[PromptPart, ...], title: str
    ) -> TurnTicket:
        now = self._tick()
        parts_json = parts_to_json(parts)

        def begin(conn: sqlite3.Connection) -> TurnTicket:
            with _write(conn):  # both reads sent before either is waited for; then the writes with the commit
                head_query = conn.execute(TURN_HEAD, (session_id,))
                news = conn.execute(TURN_MESSAGES, (session_id, known, session_id))
                head = head_query.fetchone()
                if head is None:
                    raise StoredSessionNotFoundError(session_id)
                stored_title, last, through, summary = head
                since = known if known <= last else 0
                rows = by_seq(news if since == known else conn.execute(TURN_MESSAGES, (session_id, 0, session_id)))
                pending = [(row[0], row[7]) for row in rows if row[6] == "pending"]
                self._refuse_running(session_id, pending)
                # read before the dead answers below are closed; each reads as interrupted already, its journal folded
                catch_up = self._messages(conn, session_id, [row for row in rows if row[0] > since])
                for seq, _owner in pending:
                    conn.execute(  # its journal folded into its steps, as its end_turn would have
                        "UPDATE messages SET outcome = 'interrupted', owner = NULL, updated_us = ?, "
                        "steps = coalesce(?, steps) WHERE session_id = ? AND seq = ?",
                        (now, journaled_steps(conn, session_id, seq), session_id, seq),
                    )
                    conn.execute("DELETE FROM answer_calls WHERE session_id = ? AND seq = ?", (session_id, seq))
                conn.execute(
                    f"INSERT INTO messages (session_id, {MESSAGE_COLUMNS}, created_us, updated_us) "
                    "VALUES (?, ?, 'user', ?, '', ?, NULL, 'complete', NULL, NULL, NULL, ?, ?), "
                    "(?, ?, 'assistant', '', '', NULL, NULL, 'pending', ?, NULL, NULL, ?, ?)",
                    (session_id, last + 1, content, parts_json, now, now, session_id, last + 2, self.owner, now, now),
                )
                stored_title = stored_title or title  # a title is set once: while it is empty
                conn.execute(
                    "UPDATE sessions SET updated_us = ?, title = ? WHERE id = ?", (now, stored_title, session_id)
                )
            self._live.add((session_id, last + 2))  # committed: this turn is running here
            latest = None if through is None else Compaction(through, summary)
            return TurnTicket(session_id, last + 1, last + 2, catch_up, since, stored_title, latest)

        return await self._call(begin)

    async def end_turn(
        self,
        ticket: TurnTicket,
        *,
        content: str,
        reasoning: str,
        stop_reason: StopReason | None,
        outcome: FinalOutcome,
        steps: tuple[ModelStep, ...] = (),
        usage: ContextUsage | None = None,
    ) -> None:
        now = self._tick()
        steps_json = steps_to_json(steps)
        usage_json = usage_to_json(usage)

        def end(conn: sqlite3.Connection) -> int:
            own = self._own(ticket)
            with _write(conn):  # no statement waits for another's result: one round trip to a database server
                conn.execute(f"UPDATE sessions SET updated_us = ? WHERE id = ? AND {STILL_OWNED}", (now, own[0], *own))
                if (own[0], own[1]) in self._journaled:  # only record_steps writes a journal
                    conn.execute(
                        f"DELETE FROM answer_calls WHERE session_id = ? AND seq = ? AND {STILL_OWNED}",
                        (*own[:2], *own),
                    )
                cursor = conn.execute(
                    "UPDATE messages SET content = ?, reasoning = ?, stop_reason = ?, outcome = ?, owner = NULL, "
                    f"steps = ?, usage = ?, updated_us = ? WHERE {OWN_PENDING_ANSWER}",
                    (content, reasoning, stop_reason, outcome, steps_json, usage_json, now, *own),
                )
            return cursor.rowcount  # 0: not ours any more, and the guarded writes above changed nothing either

        try:
            if await self._call(end) != 1:
                raise self._taken_over(ticket, "this answer was not saved")
        finally:
            self._live.discard((ticket.session_id, ticket.answer_seq))
            self._journaled.pop((ticket.session_id, ticket.answer_seq), None)

    async def record_steps(self, ticket: TurnTicket, steps: tuple[ModelStep, ...]) -> None:
        """Append the calls not journaled yet, one row each, and write the last journaled row again (the turn may
        still change its last call, or give a step without calls its first): a call's write costs its own size,
        not the turn's."""
        now = self._tick()
        key = (ticket.session_id, ticket.answer_seq)
        written = self._journaled.get(key, 0)
        rewrite = journal_length(steps) < written  # not a continuation of what was written: write it all again
        first = 0 if rewrite else max(written - 1, 0)
        rows = journal_rows(steps, first)

        def record(conn: sqlite3.Connection) -> int:
            if key not in self._live:  # its end_turn was called (and failed)
                return 0
            self._journaled.setdefault(key, 0)  # before writing: end_turn then removes whatever this may leave
            with _write(conn):
                owned = conn.execute(
                    f"UPDATE messages SET updated_us = ? WHERE {OWN_PENDING_ANSWER}", (now, *self._own(ticket))
                ).rowcount
                if owned != 1:
                    return owned
                if rewrite:
                    conn.execute("DELETE FROM answer_calls WHERE session_id = ? AND seq = ?", key)
                conn.executemany(
                    "INSERT OR REPLACE INTO answer_calls (session_id, seq, n, step, head, call) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(*key, first + i, step, head, call) for i, (step, head, call) in enumerate(rows)],
                )
            self._journaled[key] = first + len(rows)
            return 1

        if await self._call(record) != 1:
            raise self._taken_over(ticket, "these tool calls were not saved")

    async def record_compaction(self, session_id: str, compaction: Compaction) -> None:
        now = self._tick()
        through = compaction.through

        def record(conn: sqlite3.Connection) -> None:
            with _write(conn):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise StoredSessionNotFoundError(session_id)
                last = conn.execute(
                    "SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ? AND seq <= ?",
                    (session_id, through),
                ).fetchone()[0]
                latest = compaction_of(conn.execute(LATEST_COMPACTION, (session_id,)).fetchone())
                if through < 2 or through % 2 or last < through or (latest is not None and latest.through >= through):
                    raise StoreIOError(
                        self.location, f"a compaction of messages 1..{through} does not fit session {session_id}"
                    )
                conn.execute(
                    "INSERT INTO compactions (session_id, through, summary, created_us) VALUES (?, ?, ?, ?)",
                    (session_id, through, compaction.summary, now),
                )

        await self._call(record)

    async def record_rewind(self, session_id: str, rewind: Rewind) -> None:
        now = self._tick()

        def record(conn: sqlite3.Connection) -> None:
            with _write(conn):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise StoredSessionNotFoundError(session_id)
                insert_rewind(conn, session_id, rewind, now)

        await self._call(record)

    def _own(self, ticket: TurnTicket) -> tuple[str, int, str]:
        """The parameters of :data:`OWN_PENDING_ANSWER` for ``ticket``."""
        return ticket.session_id, ticket.answer_seq, self.owner

    def _taken_over(self, ticket: TurnTicket, lost: str) -> StoreIOError:
        return StoreIOError(
            self.location,
            f"the answer {ticket.answer_seq} of session {ticket.session_id} is no longer pending here: it ended, or "
            f"was taken over by another process (it looked interrupted); {lost}",
        )
