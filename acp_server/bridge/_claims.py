"""The ownership claims the bridge holds on journaled sessions (``SessionStore.claim``), released on every way out.

Invariants: a claim taken for an attach that did not happen is dropped at once (shielded from cancellation); the
claims of sessions the bridge's close detached are released as the bridge exits, once their prompts have unwound;
a store error while releasing is never the caller's (the store's connection is then broken or closing, and its
locks go with it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import anyio

from ..errors import ServerError
from ..store import SessionStore
from ._session import SessionEntry

__all__ = ["Claims"]


class Claims:
    """Releases the bridge's claims in ``store``; it takes none itself (each way in claims where it must)."""

    __slots__ = ("_deferred", "_store")

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._deferred: list[str] = []  # journaled sessions detached by the close, released as the bridge exits

    async def drop(self, session_id: str) -> None:
        """Release a session claimed for an attach that did not happen (shielded; a store error is not this caller's:
        the lock then goes with the store's connection)."""
        with anyio.CancelScope(shield=True), contextlib.suppress(ServerError):
            await self._store.release(session_id)

    @staticmethod
    async def release(session: SessionEntry) -> None:
        """Release a detached session whose answer is recorded: another process may take it now (memory-only: no-op)."""
        if session.journal is not None:
            with contextlib.suppress(ServerError):  # a broken store connection took its locks with it
                await session.journal.release(session.session_id)

    def defer(self, sessions: Iterable[SessionEntry]) -> None:
        """Release the journaled ones of ``sessions`` (detached by the close) in :meth:`release_deferred`."""
        self._deferred = [session.session_id for session in sessions if session.journal is not None]

    async def release_deferred(self) -> None:
        """Release every journaled session the close detached (their prompts have unwound). A store error stops it,
        quietly: the store's connection is then broken or closing, and its locks go with it."""
        deferred, self._deferred = self._deferred, []
        for session_id in deferred:
            try:
                await self._store.release(session_id)
            except ServerError:
                break
