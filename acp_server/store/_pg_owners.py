"""One owner per live session in PostgreSQL: a session-scoped advisory lock per attached session, on a connection of
its own.

Invariants:
- A session is attached by at most one store at a time across every process on the database: :meth:`Owners.claim`
  succeeds only with ``pg_try_advisory_lock(key(session))`` held on this store's lock connection.
- A lock lives exactly as long as that connection: released by :meth:`Owners.release` (detach), by closing (the
  store's close), and by the server itself when the process dies (its backend ends with the socket) — so a dead
  owner's sessions can be claimed by another process at once; nothing waits for a lease to expire.
- A lost lock connection (restart, ``pg_terminate_backend``, a cut) lost every lock with it; the next use of the
  owners (a claim, a release, a turn's :meth:`Owners.ensure`, ``/health``'s :meth:`Owners.check`) connects again
  (``_pg_link``) and re-takes the lock of every session it held, first thing. A session whose lock another process took
  meanwhile (a client that went there during the outage) is *lost*: this store stops writing turns of it — its next
  prompt here is ``session_busy`` naming the holder, while the holder keeps it — until it can take the lock again.
- ``session_owners`` only *names* the holder (its public instance id) for the ``session_busy`` answer; the lock,
  never the row, decides. A stale row (its holder died) is overwritten by the next claimant.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import psycopg

from ._exceptions import SessionBusyError, StoreClosedError
from ._pg_link import Link, is_connection_loss
from ._types import now_us

__all__ = ["Owners", "session_lock_key"]

T = TypeVar("T")
logger = logging.getLogger("acp_server.store")

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

    def __init__(self, instance: str, dsn: str) -> None:
        self.instance = instance
        self._link = Link(dsn, self._retake, application_name=instance)
        self._held: set[str] = set()
        self._lost: set[str] = set()  # held until the lock connection was lost; taken by another process meanwhile
        self._closed = False
        self._one: anyio.CapacityLimiter | None = None  # made in the event loop, at first use (as SQLite's)

    @property
    def held(self) -> frozenset[str]:
        """The sessions this store owns now."""
        return frozenset(self._held)

    @property
    def lost(self) -> frozenset[str]:
        """The sessions whose lock went with a lost connection and is held by another process (see :meth:`ensure`)."""
        return frozenset(self._lost)

    @property
    def unreachable(self) -> str | None:
        """Why the last attempt to connect again failed, until one succeeds."""
        return self._link.unreachable

    @property
    def _limiter(self) -> anyio.CapacityLimiter:
        if self._one is None:
            self._one = anyio.CapacityLimiter(1)
        return self._one

    def open(self) -> None:
        """Connect (in the caller's worker thread, at the store's open)."""
        self._link.connection()

    async def claim(self, session_id: str) -> None:
        """Own the session, or raise :class:`SessionBusyError` with the holder's instance id."""
        if session_id in self._held and self._link.usable():
            return
        holder = await self._run(lambda conn: self._take(conn, session_id))
        if holder is not None:
            raise SessionBusyError(session_id, None, instance=holder)

    async def ensure(self, session_id: str) -> None:
        """Before a turn: the lock connection made again if it was lost (the locks re-taken), and a session this store
        held but lost meanwhile taken back — or :class:`SessionBusyError` naming the process that holds it now. A
        session never claimed here is left alone (no round trip while the connection is up)."""
        if session_id in self._lost:
            await self.claim(session_id)
        elif self._held and not self._link.usable():
            await self._run(lambda conn: None)
            if session_id in self._lost:
                await self.claim(session_id)

    async def check(self) -> None:
        """A round trip on the lock connection (made again if lost, the locks re-taken); raises what it met."""
        await self._run(lambda conn: conn.execute("SELECT 1").fetchone())

    async def release(self, session_id: str) -> None:
        """Let the session go (a no-op if not owned here); its row goes first, so a busy answer never names us after.
        On a lost connection nothing is left to release: the server released the lock with it."""
        self._lost.discard(session_id)
        if session_id not in self._held:
            return
        self._held.discard(session_id)

        def release() -> None:
            conn = self._link.current
            if conn is None or conn.closed or conn.broken:
                return
            try:
                conn.execute(
                    "DELETE FROM session_owners WHERE session_id = %s AND instance = %s", (session_id, self.instance)
                )
                conn.execute("SELECT pg_advisory_unlock(%s)", (session_lock_key(session_id),))
            except psycopg.Error as exc:
                if not is_connection_loss(conn, exc):
                    raise
                self._link.drop()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(release, limiter=self._limiter)

    async def close(self) -> None:
        """Forget this store's rows and close the connection, which releases every lock it held."""

        def close() -> None:
            self._closed = True
            conn = self._link.current
            self._held.clear()
            self._lost.clear()
            if conn is None:
                return
            try:
                conn.execute("DELETE FROM session_owners WHERE instance = %s", (self.instance,))
                conn.execute("SELECT pg_advisory_unlock_all()")  # now, not when the server notices the close
            except psycopg.Error:
                pass  # the connection broke: the server has released its locks already; the rows only name us
            finally:
                self._link.drop()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(close, limiter=self._limiter)

    async def _run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn(connection)`` in the worker thread, on a connection made again if it was lost (the locks re-taken);
        run once more on a new one if the connection is lost under it (a lock taken on the lost one went with it)."""
        await self._link.backoff()

        def run() -> T:
            for attempt in (1, 2):
                if self._closed:
                    raise StoreClosedError()
                conn = self._link.connection()
                try:
                    return fn(conn)
                except psycopg.Error as exc:
                    if not is_connection_loss(conn, exc):
                        raise
                    self._link.drop()
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")

        return await anyio.to_thread.run_sync(run, limiter=self._limiter)

    def _take(self, conn: psycopg.Connection[Any], session_id: str) -> str | None:
        """Take the session's lock and name us its holder (None), or the holder's instance id."""
        key = session_lock_key(session_id)
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if (row is None or not row[0]) and not _wait_for(conn, key):
            holder = conn.execute("SELECT instance FROM session_owners WHERE session_id = %s", (session_id,))
            found = holder.fetchone()
            return str(found[0]) if found is not None else UNKNOWN_HOLDER
        try:
            self._own(conn, session_id)
        except BaseException:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            raise
        self._held.add(session_id)
        self._lost.discard(session_id)
        return None

    def _own(self, conn: psycopg.Connection[Any], session_id: str) -> None:
        conn.execute(
            "INSERT INTO session_owners (session_id, instance, since_us) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id) DO UPDATE SET instance = excluded.instance, since_us = excluded.since_us",
            (session_id, self.instance, now_us()),
        )

    def _retake(self, conn: psycopg.Connection[Any]) -> None:
        """A new lock connection: the lock of every session held on the lost one taken again at once (no wait: a
        lock held now is another process's), each row naming us again; the ones held elsewhere become lost."""
        for session_id in sorted(self._held):
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (session_lock_key(session_id),)).fetchone()
            if row is not None and row[0]:
                self._own(conn, session_id)
            else:
                self._held.discard(session_id)
                self._lost.add(session_id)
        if self._lost:
            logger.warning(
                "The lock connection to the session store was lost; %d session(s) were taken by another process "
                "meanwhile and answer session_busy here", len(self._lost)
            )


def _wait_for(conn: psycopg.Connection[Any], key: int) -> bool:
    """Wait up to :data:`GRACE_MS` for the lock (still session-scoped: taken in a transaction, it outlives it)."""
    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{GRACE_MS}ms'")
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except psycopg.errors.LockNotAvailable:
        return False
    return True
