"""Forks: a session's copy, made when its fork request reaches the head of the session's FIFO.

Invariants: a journaled session's copy is stored and claimed before it is attached here; the copy is attached only
if the bridge is open, the source session still attached and the caller still waiting, else its claim is dropped
and the request fails (closed bridge or session); a caller that leaves never leaves a child attached or claimed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from ..errors import ServerError
from ._claims import Claims
from ._exceptions import BridgeClosedError, SessionClosedError
from ._registry import SessionRegistry
from ._session import ForkRequest, SessionEntry

__all__ = ["Forks"]


class Forks:
    """Makes and undoes the copies of the sessions in ``sessions``; ``is_open`` tells whether the bridge still is."""

    __slots__ = ("_claims", "_is_open", "_sessions")

    def __init__(self, sessions: SessionRegistry, claims: Claims, is_open: Callable[[], bool]) -> None:
        self._sessions = sessions
        self._claims = claims
        self._is_open = is_open

    async def copy(self, session: SessionEntry, item: ForkRequest) -> None:
        """Copy the session (in the store first when journaled); always sets ``item.done``."""
        try:
            cwd = item.cwd if item.cwd is not None else session.cwd
            own = item.additional_directories
            directories = session.additional_directories if own is None else own
            prompt = session.system_prompt if item.system_prompt is None else item.system_prompt
            child_id = uuid.uuid4().hex
            mode = session.mode  # the child's mode at creation, stored with it (read once: a switch may land meanwhile)
            journal = session.journal
            if journal is not None:
                try:
                    await journal.fork_session(
                        session.session_id, child_id, cwd=cwd, mode=mode, additional_directories=directories
                    )
                    if prompt is not None:  # the store's fork copies none: the child's is written beside it
                        await journal.set_system_prompt(child_id, prompt)
                    await journal.claim(child_id)  # new: nobody else can hold it
                except ServerError as exc:
                    item.fail(exc)
                    return
            gone = not self._is_open() or item.abandoned
            if gone or session.closed:
                item.fail(BridgeClosedError() if gone else SessionClosedError(session.session_id))
                if journal is not None:
                    await self._claims.drop(child_id)
            else:
                if self._sessions.checkpoints is not None:  # the child's own copy: its rewinds never touch the source's
                    await self._sessions.checkpoints.copy(session.session_id, child_id)
                item.child = self._sessions.add(
                    cwd,
                    child_id,
                    session.conversation.fork(),
                    session.title,
                    journal=journal,
                    synced=session.synced,
                    mode=mode,
                    model=session.model,
                    roots=directories,
                )
                item.child.rewinds = list(session.rewinds)
                item.child.system_prompt = prompt
        finally:
            item.fail(BridgeClosedError())  # only counts when nothing else was decided; sets ``done``

    async def abandon(self, session: SessionEntry, request: ForkRequest) -> None:
        """The caller of ``request`` left: don't fork for nobody (a child already attached is detached, unclaimed)."""
        session.fifo.withdraw(request)
        request.abandoned = True
        if request.child is not None and self._sessions.discard(request.child):
            request.child.closed_event.set()
            await self._claims.drop(request.child.session_id)
