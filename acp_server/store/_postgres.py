"""The PostgreSQL session store: the SQLite store's transactions, run on one psycopg 3 connection.

The SQL of ``_sqlite.py`` is the one statement of each rule; :class:`_Dialect` adapts its few SQLite spellings
(``?`` parameters, ``BEGIN IMMEDIATE``, ``INSERT OR REPLACE``) so the two stores cannot drift apart. A statement is
queued, not sent, until the store needs a result or commits (see :class:`_Dialect`): a turn's writes take three round
trips (two to begin it, one to end it), each statement planned once per connection. Every call runs in a worker
thread behind a ``CapacityLimiter(1)`` as in SQLite (the event loop never waits on the database); a write transaction
first takes ``pg_advisory_xact_lock`` of the store, so writers are serialised exactly as SQLite's one write lock
serialises them, and a commit is durable (``synchronous_commit`` stays on) before the call returns.

A lost connection (the server restarted, the backend was ended, a pooler or firewall cut it) is replaced at the next
call (``_pg_link``: bounded backoff, its prepared statements forgotten). A call that finds its connection lost while
running is run again once on a new one when nothing of it can have been committed (a read, or a write whose
``COMMIT`` was not sent yet); one whose ``COMMIT`` was under way fails ``store_io_error`` (whether it was written is
then unknown: a turn's answer left pending reads as interrupted, see ``_base``). A call fails ``store_io_error`` when
the server cannot be reached, saying so, and :meth:`PostgresSessionStore.health` tells ``/health``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import psycopg
from psycopg import pq

from ..domain import PromptPart
from ..tasks import Lifecycle
from ._exceptions import StoreClosedError, StoreError, StoreIOError, StoreUnavailableError
from ._pg_link import Link, is_connection_loss
from ._pg_owners import Owners
from ._rewinds import REWINDS_TABLE
from ._sqlite import SqliteSessionStore
from ._types import TurnTicket

__all__ = ["PG_SCHEMA_VERSION", "PostgresSessionStore"]

T = TypeVar("T")
_WRITE_LOCK = 0x41435053  # "ACPS": the advisory lock every write transaction holds (SQLite's write lock)
_HINT = "Check that the PostgreSQL server is up and that --store (ACP_SERVER_STORE) names it and its database."

# MIGRATIONS[i] takes a database from version i to i + 1; never edit a released step, append one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE FUNCTION acp_cwd_key(p text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
        DECLARE parts text[] := '{}'; seg text; absolute boolean := left(p, 1) = '/'; r text;
        BEGIN
          FOREACH seg IN ARRAY string_to_array(p, '/') LOOP
            IF seg = '' OR seg = '.' THEN CONTINUE;
            ELSIF seg = '..' AND cardinality(parts) > 0 AND parts[cardinality(parts)] <> '..' THEN
              parts := parts[1:cardinality(parts) - 1];
            ELSIF seg = '..' AND absolute THEN CONTINUE;
            ELSE parts := parts || seg;
            END IF;
          END LOOP;
          r := array_to_string(parts, '/');
          IF absolute THEN RETURN '/' || r; END IF;
          RETURN CASE WHEN r = '' THEN '.' ELSE r END;
        END $$""",
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY, cwd TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
            created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL, parent_id TEXT, mode TEXT, model TEXT
        )""",
        "CREATE INDEX sessions_by_update ON sessions (updated_us DESC, id DESC)",
        """CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq BIGINT NOT NULL CHECK (seq > 0),
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content TEXT NOT NULL, reasoning TEXT NOT NULL DEFAULT '', parts TEXT, stop_reason TEXT,
            outcome TEXT NOT NULL CHECK (outcome IN ('complete', 'failed', 'cancelled', 'interrupted', 'pending')),
            owner TEXT, created_us BIGINT NOT NULL, updated_us BIGINT NOT NULL, steps TEXT, usage TEXT,
            PRIMARY KEY (session_id, seq)
        )""",
        "CREATE INDEX messages_pending ON messages (session_id) WHERE outcome = 'pending'",
        """CREATE TABLE answer_calls (
            session_id TEXT NOT NULL, seq BIGINT NOT NULL, n BIGINT NOT NULL CHECK (n >= 0),
            step BIGINT NOT NULL CHECK (step >= 0), head TEXT, call TEXT,
            PRIMARY KEY (session_id, seq, n),
            FOREIGN KEY (session_id, seq) REFERENCES messages (session_id, seq) ON DELETE CASCADE
        )""",
        """CREATE TABLE compactions (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            through BIGINT NOT NULL CHECK (through > 0), summary TEXT NOT NULL, created_us BIGINT NOT NULL,
            PRIMARY KEY (session_id, through)
        )""",
    ),
    (  # 2: who owns a live session (the advisory lock decides; the row names the holder, see _pg_owners)
        "CREATE TABLE session_owners (session_id TEXT PRIMARY KEY, instance TEXT NOT NULL, since_us BIGINT NOT NULL)",
    ),
    ("ALTER TABLE sessions ADD COLUMN additional_directories TEXT",),  # 3: JSON array of the extra roots
    (REWINDS_TABLE.replace("INTEGER", "BIGINT"),),  # 4: the conversation's rewinds (/rewind)
    ("ALTER TABLE sessions ADD COLUMN system_prompt TEXT",),  # 5: the client's system prompt (JSON, ClientPrompt)
    (  # 6: a subagent child names the session whose task call ran it (listed only under it, deleted with it)
        "ALTER TABLE sessions ADD COLUMN task_of TEXT",
        "CREATE INDEX sessions_by_task_of ON sessions (task_of, created_us) WHERE task_of IS NOT NULL",
    ),
)
PG_SCHEMA_VERSION = len(MIGRATIONS)

_REPLACE = "INSERT OR REPLACE INTO answer_calls (session_id, seq, n, step, head, call) VALUES (?, ?, ?, ?, ?, ?)"
_UPSERT = (
    "INSERT INTO answer_calls (session_id, seq, n, step, head, call) VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (session_id, seq, n) DO UPDATE SET step = excluded.step, head = excluded.head, call = excluded.call"
)


def _translate(sql: str) -> str:
    """The PostgreSQL spelling of one of the SQLite store's statements."""
    if sql == _REPLACE:
        return _UPSERT
    return sql.replace("?", "%s")


class _Dialect:
    """The part of ``sqlite3.Connection`` the SQLite store uses, on a psycopg connection in autocommit mode.

    Statements are not sent one by one: each is bound (client-side, by psycopg's ``ClientCursor``: an ``EXECUTE`` of
    the statement prepared once per connection) and queued, and the queue goes to the server as one query when it needs
    a result (a row, a rowcount) and at ``COMMIT`` — a round trip per result waited for, not per statement (a round
    trip to a database server costs two context switches, and more on a busy machine). The server runs the queue in
    order and stops at the first error, which is raised then; ``COMMIT`` returns once the server has confirmed it."""

    def __init__(self, conn: psycopg.Connection[Any], prepared: _Prepared) -> None:
        self.conn = conn
        self._binder = psycopg.ClientCursor(conn)
        self._queue: list[tuple[str, _Result | None]] = []
        self._prepared = prepared
        self._preparing: list[str] = []  # the statements whose PREPARE is in the queue
        self._writing = False  # a write transaction (BEGIN IMMEDIATE) is open
        self.maybe_written = False  # a write's COMMIT was sent: a failure after it may have been committed

    @property
    def in_transaction(self) -> bool:
        """Statements queued, or a transaction open on the server (a lost connection has none left)."""
        return bool(self._queue) or self.conn.info.transaction_status in _OPEN

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        if sql == "ROLLBACK":
            self._queue.clear()  # not sent, or not run after the error: nothing of it to undo
            self._prepared.forget(self._preparing)  # their PREPAREs were in it: prepared again at next use
            self._preparing = []
            self._writing = False
            if self.conn.info.transaction_status in _OPEN:
                self.conn.execute("ROLLBACK")
            return _Result(self)
        if sql == "BEGIN IMMEDIATE":
            self._writing = True
            self._queue.append(("BEGIN", None))
            sql = f"SELECT pg_advisory_xact_lock({_WRITE_LOCK})"
        elif sql == "BEGIN":
            sql = "BEGIN ISOLATION LEVEL REPEATABLE READ"
        result = _Result(self)
        self._queue.append((self._execute(_translate(sql), tuple(params)) if params else sql, result))
        if sql == "COMMIT":
            self.flush()
        return result

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> _Result:
        result = _Result(self)
        for row in rows:
            result = self.execute(sql, row)
        return result

    def _execute(self, sql: str, params: tuple[Any, ...]) -> str:
        """``EXECUTE`` of the statement prepared for ``sql`` (its ``PREPARE`` queued first, the first time): the
        server plans each statement once per connection, as for psycopg's own prepared statements. Bound before
        anything is recorded, so a value that cannot be bound leaves no name behind for a statement never prepared.
        PostgreSQL's text cannot hold U+0000, which SQLite's can: a NUL in a text value is stored as U+FFFD."""
        values = tuple(_no_nul(value) for value in params)
        known = self._prepared.names.get(sql)
        name = known or self._prepared.next_name()
        bound = self._binder.mogrify(f"EXECUTE {name}({', '.join(['%s'] * len(values))})", values)
        if known is None:
            numbered = iter(range(1, len(values) + 1))
            self._queue.append((f"PREPARE {name} AS {re.sub('%s', lambda _m: f'${next(numbered)}', sql)}", None))
            self._prepared.names[sql] = name
            self._preparing.append(sql)
        return bound

    def flush(self) -> None:
        """Send the queued statements as one query and hand each its result (rows, rowcount)."""
        queue, self._queue = self._queue, []
        preparing, self._preparing = self._preparing, []
        if not queue:
            return
        if self._writing and queue[-1][0] == "COMMIT":
            self._writing = False
            self.maybe_written = True
        try:
            cursor = self.conn.execute(";\n".join(statement for statement, _ in queue))
        except BaseException:
            self._prepared.forget(preparing)  # maybe not run: prepared again (under a new name) at next use
            raise
        for _statement, result in queue:
            if result is not None:
                result.rows = cursor.fetchall() if cursor.pgresult is not None and cursor.description else []
                result.count = cursor.rowcount
            cursor.nextset()


_OPEN = (pq.TransactionStatus.ACTIVE, pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)


def _no_nul(value: Any) -> Any:
    """``value``, a string without U+0000 (PostgreSQL's text refuses it; stored as U+FFFD)."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


class _Prepared:
    """The statements prepared on one connection (a name is never reused: a forgotten one may still exist)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self._made = 0

    def next_name(self) -> str:
        """A name no statement of this connection had (recorded in :attr:`names` by the caller once queued)."""
        self._made += 1
        return f"acp_{self._made}"

    def forget(self, statements: list[str]) -> None:
        for sql in statements:
            self.names.pop(sql, None)


class _Result:
    """A queued statement's result, read as a ``sqlite3.Cursor``'s is: reading it first sends the queue."""

    __slots__ = ("_dialect", "count", "rows")

    def __init__(self, dialect: _Dialect) -> None:
        self._dialect = dialect
        self.rows: list[Any] | None = None
        self.count = -1

    def _ready(self) -> list[Any]:
        if self.rows is None:
            self._dialect.flush()
        return self.rows if self.rows is not None else []

    @property
    def rowcount(self) -> int:
        self._ready()
        return self.count

    def fetchone(self) -> Any:
        rows = self._ready()
        return rows.pop(0) if rows else None

    def fetchall(self) -> list[Any]:
        rows = self._ready()
        self.rows = []
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


def _migrate(conn: psycopg.Connection[Any]) -> None:
    """Bring the database to :data:`PG_SCHEMA_VERSION` in one transaction (another process may race: the advisory
    lock makes the second wait and then find the work done)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS acp_schema (version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM acp_schema").fetchone()
        version = 0 if row is None else int(row[0])
        if version > PG_SCHEMA_VERSION:
            raise ValueError(f"its schema version {version} is newer than this acp-server supports")
        for step in MIGRATIONS[version:]:
            for statement in step:
                conn.execute(statement)
        conn.execute("DELETE FROM acp_schema")
        conn.execute("INSERT INTO acp_schema (version) VALUES (%s)", (PG_SCHEMA_VERSION,))


class PostgresSessionStore(SqliteSessionStore):
    """Sessions in a PostgreSQL database (``postgresql://…``); the same contract as the SQLite store, and one owner
    per live session across processes (:meth:`claim`, see ``_pg_owners``). Its two connections (data, locks) are
    made again when lost (see the module docstring and ``_pg_link``)."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self._dsn = dsn
        self._link = Link(dsn, self._connected)
        self._owners = Owners(self.instance, dsn)
        self._prepared = _Prepared()

    @property
    def _pg(self) -> psycopg.Connection[Any] | None:
        """The data connection in use (None when lost, before it is made again)."""
        return self._link.current

    @property
    def location(self) -> str:
        """The DSN without its password (never a secret in an error)."""
        try:
            info = psycopg.conninfo.conninfo_to_dict(self._dsn)
        except psycopg.Error:
            return "postgresql"
        info.pop("password", None)
        return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})

    def _connected(self, conn: psycopg.Connection[Any]) -> None:
        """A new data connection: none of the statements prepared on the one before exists on it."""
        conn.execute("SET plan_cache_mode = force_generic_plan")  # key lookups: planned once, not each time
        self._prepared = _Prepared()

    async def _open(self) -> StoreUnavailableError | None:
        self._limiter = anyio.CapacityLimiter(1)

        def connect() -> None:
            _migrate(self._link.connection())
            self._owners.open()

        try:
            await anyio.to_thread.run_sync(connect, limiter=self._limiter)
        except ValueError as exc:
            self._link.drop()
            return StoreUnavailableError(self.location, "schema_too_new", str(exc), hint=_HINT)
        except psycopg.Error as exc:
            self._link.drop()
            return StoreUnavailableError(
                self.location, "cannot_open", f"cannot connect ({type(exc).__name__})", hint=_HINT
            )
        return None

    async def health(self) -> StoreError | None:
        """None once a round trip on each connection has succeeded (a lost one made again, the locks re-taken);
        else why the store cannot be used now."""
        try:
            self._check()
            await self._call(_ping)
        except StoreError as exc:
            return exc
        try:
            await self._owners.check()
        except psycopg.Error as exc:
            return self._pg_error(exc, self._owners.unreachable)
        except StoreError as exc:
            return exc
        return None

    async def claim(self, session_id: str) -> None:
        """Take the session's advisory lock (see ``_pg_owners``); held by another store: ``SessionBusyError`` with its
        instance id."""
        self._check()
        try:
            await self._owners.claim(session_id)
        except psycopg.Error as exc:
            raise self._pg_error(exc, self._owners.unreachable) from exc

    async def release(self, session_id: str) -> None:
        if self._limiter is None or self._life is not Lifecycle.OPEN:
            return  # closed: the connection that held the lock is gone, and the lock with it
        try:
            await self._owners.release(session_id)
        except psycopg.Error as exc:
            raise self._pg_error(exc, self._owners.unreachable) from exc

    async def begin_turn(
        self, session_id: str, *, known: int, content: str, parts: tuple[PromptPart, ...], title: str
    ) -> TurnTicket:
        """As the SQLite store's, once this store still owns the session if it claimed it: a lock lost with its
        connection and taken by another process meanwhile is ``session_busy`` (naming that process) here."""
        self._check()
        try:
            await self._owners.ensure(session_id)
        except psycopg.Error as exc:
            raise self._pg_error(exc, self._owners.unreachable) from exc
        return await super().begin_turn(session_id, known=known, content=content, parts=parts, title=title)

    async def _close(self) -> None:
        if self._limiter is None:
            return
        await self._owners.close()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._link.drop, limiter=self._limiter)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` in a worker thread, alone on the connection; map psycopg errors once. A
        connection found lost is made again first; one lost under ``fn`` runs it again once on a new one, unless a
        write's ``COMMIT`` was sent (see the module docstring)."""
        self._check()
        assert self._limiter is not None
        await self._link.backoff()

        def attempt() -> T:
            if self._life is not Lifecycle.OPEN:
                raise StoreClosedError()
            conn = self._link.connection()
            dialect = _Dialect(conn, self._prepared)
            try:
                return fn(dialect, *args)
            except psycopg.Error as exc:
                if is_connection_loss(conn, exc):
                    self._link.drop()
                    if not dialect.maybe_written:
                        raise _Again() from exc
                raise
            finally:
                if dialect.in_transaction and not conn.closed:  # outside _write's rollback: the commit failed
                    dialect.execute("ROLLBACK")

        def run() -> T:
            try:
                return attempt()
            except _Again as again:
                try:
                    return attempt()
                except _Again as lost:
                    assert isinstance(lost.__cause__, psycopg.Error)
                    raise lost.__cause__ from again.__cause__

        try:
            return await anyio.to_thread.run_sync(run, limiter=self._limiter)
        except psycopg.Error as exc:
            raise self._pg_error(exc, self._link.unreachable) from exc

    def _pg_error(self, exc: psycopg.Error, unreachable: str | None) -> StoreError:
        """The one mapping of psycopg's errors after opening: ``store_io_error``, saying so when the database cannot
        be reached (``unreachable``: why the last attempt to connect failed) or the connection was lost under the
        call."""
        if unreachable is not None:
            detail = f"the database cannot be reached ({unreachable}); the next call tries again"
            return StoreIOError(self.location, detail)
        detail = f"{type(exc).__name__}: {exc.diag.message_primary or 'database error'}"
        if isinstance(exc, psycopg.OperationalError) and (exc.sqlstate or "08").startswith(("08", "57P")):
            return StoreIOError(self.location, f"the connection to the database was lost under this call ({detail})")
        return StoreIOError(self.location, detail)


class _Again(Exception):
    """The connection was lost under a call that wrote nothing: run it once more (its cause: the loss)."""


def _ping(conn: _Dialect) -> None:
    conn.execute("SELECT 1").fetchone()
