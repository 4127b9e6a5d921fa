"""One owner per live session in PostgreSQL: a session-scoped advisory lock per attached session, on a connection of
its own.

Invariants:
- A session is attached by at most one store at a time across every process on the database: :meth:`Owners.claim`
  succeeds only with ``pg_try_advisory_lock(key(session))`` held on this store's lock connection.
- A lock lives exactly as long as that connection: released by :meth:`Owners.release` (detach), by closing (the
  store's close), and by the server itself when the process dies (its backend ends with the socket) — so a dead
  owner's sessions can be claimed by another process at once; nothing waits for a lease to expire.
- ``session_owners`` only *names* the holder (its public instance id) for the ``session_busy`` answer; the lock,
  never the row, decides. A stale row (its holder died) is overwritten by the next claimant.
"""

from __future__ import annotations

import hashlib
from typing import Any

import anyio
import anyio.to_thread
import psycopg

from ._exceptions import SessionBusyError, StoreClosedError
from ._types import now_us

__all__ = ["Owners", "session_lock_key"]

GRACE_MS = 200
"""How long a claim waits for a held lock before answering busy: a killed holder's backend ends an instant after
its socket closes, and its locks with it; a live holder keeps them (then ``session_busy``)."""

UNKNOWN_HOLDER = "unknown"
"""The holder named when the lock is held but its row is not written yet (the claim in flight) or was lost."""


def session_lock_key(session_id: str) -> int:
    """The advisory lock key (a signed 64-bit integer) of a session: stable across processes and versions."""
    digest = hashlib.blake2b(b"acp-server session\0" + session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Owners:
    """The advisory locks of one store on its dedicated connection; every call runs in a worker thread, one at a time
    (a claim never waits behind the store's own reads and writes, which use the other connection)."""

    def __init__(self, instance: str) -> None:
        self.instance = instance
        self._conn: psycopg.Connection[Any] | None = None
        self._held: set[str] = set()
        self._one: anyio.CapacityLimiter | None = None  # made in the event loop, at first use (as SQLite's)

    @property
    def held(self) -> frozenset[str]:
        """The sessions this store owns now."""
        return frozenset(self._held)

    @property
    def _limiter(self) -> anyio.CapacityLimiter:
        if self._one is None:
            self._one = anyio.CapacityLimiter(1)
        return self._one

    def open(self, dsn: str) -> None:
        """Connect (in the caller's worker thread, at the store's open)."""
        self._conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10, application_name=self.instance)

    async def claim(self, session_id: str) -> None:
        """Own the session, or raise :class:`SessionBusyError` with the holder's instance id."""
        if session_id in self._held:
            return

        def claim() -> str | None:
            conn = self._connection()
            key = session_lock_key(session_id)
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if (row is None or not row[0]) and not _wait_for(conn, key):
                holder = conn.execute("SELECT instance FROM session_owners WHERE session_id = %s", (session_id,))
                found = holder.fetchone()
                return str(found[0]) if found is not None else UNKNOWN_HOLDER
            try:
                conn.execute(
                    "INSERT INTO session_owners (session_id, instance, since_us) VALUES (%s, %s, %s) "
                    "ON CONFLICT (session_id) DO UPDATE SET instance = excluded.instance, since_us = excluded.since_us",
                    (session_id, self.instance, now_us()),
                )
            except BaseException:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                raise
            return None

        holder = await anyio.to_thread.run_sync(claim, limiter=self._limiter)
        if holder is not None:
            raise SessionBusyError(session_id, None, instance=holder)
        self._held.add(session_id)

    async def release(self, session_id: str) -> None:
        """Let the session go (a no-op if not owned here); its row goes first, so a busy answer never names us after."""
        if session_id not in self._held:
            return
        self._held.discard(session_id)

        def release() -> None:
            conn = self._connection()
            conn.execute(
                "DELETE FROM session_owners WHERE session_id = %s AND instance = %s", (session_id, self.instance)
            )
            conn.execute("SELECT pg_advisory_unlock(%s)", (session_lock_key(session_id),))

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(release, limiter=self._limiter)

    async def close(self) -> None:
        """Forget this store's rows and close the connection, which releases every lock it held."""

        def close() -> None:
            conn, self._conn = self._conn, None
            self._held.clear()
            if conn is None:
                return
            try:
                conn.execute("DELETE FROM session_owners WHERE instance = %s", (self.instance,))
                conn.execute("SELECT pg_advisory_unlock_all()")  # now, not when the server notices the close
            except psycopg.Error:
                pass  # the connection broke: the server has released its locks already; the rows only name us
            finally:
                conn.close()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(close, limiter=self._limiter)

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            raise StoreClosedError()
        return self._conn


def _wait_for(conn: psycopg.Connection[Any], key: int) -> bool:
    """Wait up to :data:`GRACE_MS` for the lock (still session-scoped: taken in a transaction, it outlives it)."""
    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{GRACE_MS}ms'")
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except psycopg.errors.LockNotAvailable:
        return False
    return True
