"""One connection of the PostgreSQL store to its server, made again whenever it is found lost.

Invariants:
- A connection is used only while it is usable: before each use, a lost one (closed, broken, or — idle between calls —
  readable: the server ended the backend, a restart, ``pg_terminate_backend``, a pooler's or firewall's cut, and told
  us so or closed the socket) is dropped without a round trip, and the next use connects again. ``on_connect`` runs on
  each new connection before it is handed out (the store forgets its prepared statements there; the owners re-take
  their locks), so nothing of a lost connection's state is ever assumed on its successor.
- Attempts are spaced by a bounded backoff while the server cannot be reached (:data:`FIRST_BACKOFF_S` doubling up to
  :data:`MAX_BACKOFF_S`): a caller waits out what is left of it (:meth:`Link.backoff`, cancellable) and then tries
  once, so a call fails only when its own attempt failed — while the server really is unreachable — and its error
  says so (:attr:`Link.unreachable`).
- Over TCP, a silent cut (a firewall dropping an idle connection) is found by keepalives and a dead server by
  ``tcp_user_timeout`` (:data:`TCP_DEFAULTS`, where the URL sets none of its own): a lost socket then reads as lost
  above, and a call to a vanished server fails within half a minute instead of the kernel's quarter of an hour.
- Every method but :meth:`backoff` runs in the caller's worker thread, behind the caller's ``CapacityLimiter(1)``.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from typing import Any

import anyio
import psycopg
from psycopg import pq

__all__ = ["FIRST_BACKOFF_S", "MAX_BACKOFF_S", "TCP_DEFAULTS", "Link", "is_connection_loss"]

FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
CONNECT_TIMEOUT_S = 10
TCP_DEFAULTS: dict[str, Any] = {
    "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3, "tcp_user_timeout": 30_000
}
"""libpq's TCP settings, each one used unless the URL gives its own (a Unix socket ignores them)."""


def is_connection_loss(conn: psycopg.Connection[Any], exc: psycopg.Error) -> bool:
    """Whether ``exc``, raised by a statement on ``conn``, means the connection is gone (not the statement's fault)."""
    return conn.closed or conn.broken or (exc.sqlstate or "").startswith(("08", "57P"))


class Link:
    """The current connection to ``dsn`` (autocommit), connected again after a loss; see the module docstring."""

    def __init__(
        self, dsn: str, on_connect: Callable[[psycopg.Connection[Any]], None], *, application_name: str = ""
    ) -> None:
        self._dsn = dsn
        self._on_connect = on_connect
        try:
            given = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            given = {}  # connect() says what is wrong with it
        self._extra: dict[str, Any] = {k: v for k, v in TCP_DEFAULTS.items() if k not in given}
        if application_name:
            self._extra["application_name"] = application_name
        self._conn: psycopg.Connection[Any] | None = None
        self._failures = 0
        self._retry_at = 0.0
        self.unreachable: str | None = None
        """Why the last attempt to connect failed, until one succeeds (the database cannot be reached)."""

    @property
    def current(self) -> psycopg.Connection[Any] | None:
        """The connection in use (None before the first, after a loss, and once closed)."""
        return self._conn

    def usable(self) -> bool:
        """Whether :attr:`current` can be used as is (no round trip: see :func:`_lost`)."""
        return self._conn is not None and not _lost(self._conn)

    async def backoff(self) -> None:
        """Wait out what is left of the backoff after a failed attempt (nothing while connected)."""
        if self._conn is None and self._failures:
            await anyio.sleep(max(0.0, self._retry_at - time.monotonic()))

    def connection(self) -> psycopg.Connection[Any]:
        """The current connection, or a new one if it was lost (``on_connect`` run on it); raises the attempt's
        ``psycopg.Error`` when the server cannot be reached."""
        if self._conn is not None and _lost(self._conn):
            self.drop()
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def drop(self) -> None:
        """Forget the current connection (lost: its backend is gone, and the server released whatever it held)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, **self._extra)
            try:
                self._on_connect(conn)
            except BaseException:
                conn.close()
                raise
        except psycopg.Error as exc:
            self._failures += 1
            self._retry_at = time.monotonic() + min(FIRST_BACKOFF_S * 2 ** (self._failures - 1), MAX_BACKOFF_S)
            self.unreachable = _first_line(exc)
            raise
        self._failures = 0
        self.unreachable = None
        return conn


def _lost(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection is known lost without asking the server: closed or broken here, or readable — the
    server never speaks to an idle connection of ours unasked (we LISTEN to nothing), so data or an end of file there
    is its goodbye (``FATAL: terminating connection``) or the socket's close. A rare stray notice only costs a new
    connection."""
    if conn.closed or conn.broken:
        return True
    status = conn.info.transaction_status
    if status != pq.TransactionStatus.IDLE:
        return status == pq.TransactionStatus.UNKNOWN  # else in use: a transaction of the caller's
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):
        return True


def _first_line(exc: psycopg.Error) -> str:
    text = (str(exc).strip().splitlines() or [""])[0].strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
