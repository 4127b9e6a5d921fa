"""The PostgreSQL session store: the SQLite store's transactions, run on one psycopg 3 connection.

The SQL of ``_sqlite.py`` is the one statement of each rule; :class:`_Dialect` adapts its few SQLite spellings
(``?`` parameters, ``BEGIN IMMEDIATE``, ``INSERT OR REPLACE``) so the two stores cannot drift apart. A statement is
queued, not sent, until the store needs a result or commits (see :class:`_Dialect`): a turn's writes take three round
trips (two to begin it, one to end it), each statement planned once per connection. Every call runs in a worker
thread behind a ``CapacityLimiter(1)`` as in SQLite (the event loop never waits on the database); a write transaction
first takes ``pg_advisory_xact_lock`` of the store, so writers are serialised exactly as SQLite's one write lock
serialises them, and a commit is durable (``synchronous_commit`` stays on) before the call returns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import psycopg
from psycopg import pq

from ._exceptions import StoreClosedError, StoreError, StoreIOError, StoreUnavailableError
from ._pg_owners import Owners
from ._sqlite import SqliteSessionStore

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

    @property
    def in_transaction(self) -> bool:
        return bool(self._queue) or self.conn.info.transaction_status != pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        if sql == "ROLLBACK":
            self._queue.clear()  # not sent, or not run after the error: nothing of it to undo
            self._prepared.forget(self._preparing)  # their PREPAREs were in it: prepared again at next use
            self._preparing = []
            if self.conn.info.transaction_status != pq.TransactionStatus.IDLE:
                self.conn.execute("ROLLBACK")
            return _Result(self)
        if sql == "BEGIN IMMEDIATE":
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
    per live session across processes (:meth:`claim`, see ``_pg_owners``)."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self._dsn = dsn
        self._pg: psycopg.Connection[Any] | None = None
        self._owners = Owners(self.instance)
        self._prepared = _Prepared()

    @property
    def location(self) -> str:
        """The DSN without its password (never a secret in an error)."""
        try:
            info = psycopg.conninfo.conninfo_to_dict(self._dsn)
        except psycopg.Error:
            return "postgresql"
        info.pop("password", None)
        return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})

    async def _open(self) -> StoreUnavailableError | None:
        self._limiter = anyio.CapacityLimiter(1)

        def connect() -> psycopg.Connection[Any]:
            conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=10)
            try:
                conn.execute("SET plan_cache_mode = force_generic_plan")  # key lookups: planned once, not each time
                _migrate(conn)
                self._owners.open(self._dsn)
            except BaseException:
                conn.close()
                raise
            return conn

        try:
            self._pg = await anyio.to_thread.run_sync(connect, limiter=self._limiter)
        except ValueError as exc:
            return StoreUnavailableError(self.location, "schema_too_new", str(exc), hint=_HINT)
        except psycopg.Error as exc:
            return StoreUnavailableError(
                self.location, "cannot_open", f"cannot connect ({type(exc).__name__})", hint=_HINT
            )
        return None

    async def claim(self, session_id: str) -> None:
        """Take the session's advisory lock (see ``_pg_owners``); held by another store: ``SessionBusyError`` with its
        instance id."""
        self._check()
        try:
            await self._owners.claim(session_id)
        except psycopg.Error as exc:
            raise self._pg_error(exc) from exc

    async def release(self, session_id: str) -> None:
        if self._pg is None:
            return  # closed: the connection that held the lock is gone, and the lock with it
        try:
            await self._owners.release(session_id)
        except psycopg.Error as exc:
            raise self._pg_error(exc) from exc

    async def _close(self) -> None:
        if self._limiter is None:
            return
        await self._owners.close()

        def close() -> None:
            conn, self._pg = self._pg, None
            if conn is not None:
                conn.close()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(close, limiter=self._limiter)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` in a worker thread, alone on the connection; map psycopg errors once."""
        self._check()
        assert self._limiter is not None

        def run() -> T:
            conn = self._pg
            if conn is None:
                raise StoreClosedError()
            dialect = _Dialect(conn, self._prepared)
            try:
                return fn(dialect, *args)
            finally:
                if dialect.in_transaction:  # outside _write's rollback: the commit failed, the connection broke
                    dialect.execute("ROLLBACK")

        try:
            return await anyio.to_thread.run_sync(run, limiter=self._limiter)
        except psycopg.Error as exc:
            raise self._pg_error(exc) from exc

    def _pg_error(self, exc: psycopg.Error) -> StoreError:
        return StoreIOError(self.location, f"{type(exc).__name__}: {exc.diag.message_primary or 'database error'}")
