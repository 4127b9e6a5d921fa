"""The bridge's attached sessions: one entry per id, the mode each is attached in, and who is told of their changes.

Invariants: at most one attached entry per session id; a session is attached in a mode allowed here (none given,
or a stored one no longer allowed, reads as the default: a mode the server no longer allows is never applied);
every detach by a close and every real settings change of an attached session is told to each listener added
before it, exactly once, in order; so is every change of an attached session's commands (its MCP servers' prompts).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..checkpoints import CheckpointRoot
from ..domain import Conversation
from ..store import SessionSnapshot, SessionStore
from ..tools.registry import ToolSet
from ._exceptions import SessionAlreadyExistsError, SessionNotFoundError
from ._prompt import Cause, PromptJob
from ._session import SessionEntry, SettingsChange
from ._settings import SettingsRules

__all__ = ["SessionRegistry", "SettingsListener"]

SettingsListener = Callable[[SettingsChange], None]
"""Told each change of a session's mode, model or title (see :meth:`SessionRegistry.add_settings_listener`)."""


class SessionRegistry:
    """The attached sessions by id, oldest first (each in a mode ``rules`` offer); the close and settings
    listeners."""

    __slots__ = (
        "_close_listeners",
        "_commands_listeners",
        "_deleting",
        "_rules",
        "_sessions",
        "_settings_listeners",
        "_tools",
        "checkpoints",
    )

    def __init__(
        self, rules: SettingsRules, tools: ToolSet | None = None, checkpoints: CheckpointRoot | None = None
    ) -> None:
        self._rules = rules
        self._tools = tools
        self.checkpoints = checkpoints  # where the sessions' checkpoints live (None: none are kept)
        self._sessions: dict[str, SessionEntry] = {}
        self._close_listeners: list[Callable[[str], None]] = []
        self._settings_listeners: list[SettingsListener] = []
        self._commands_listeners: list[Callable[[SessionEntry], None]] = []
        self._deleting: Counter[str] = Counter()  # deletes in progress by session: a load finds nothing meanwhile

    # -- the table -------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._sessions

    @property
    def sessions(self) -> tuple[SessionEntry, ...]:
        """The attached sessions, oldest first."""
        return tuple(self._sessions.values())

    def find(self, session_id: str) -> SessionEntry | None:
        """The attached session ``session_id``, or None."""
        return self._sessions.get(session_id)

    def get(self, session_id: str) -> SessionEntry:
        """The attached session ``session_id``; not attached: ``SessionNotFoundError``."""
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFoundError(session_id) from None

    def add(
        self,
        cwd: str,
        session_id: str | None,
        conversation: Conversation,
        title: str = "",
        *,
        journal: SessionStore | None = None,
        synced: int = 0,
        mode: str | None = None,
        model: str | None = None,
        roots: tuple[str, ...] = (),
    ) -> SessionEntry:
        """Attach a new entry (``session_id`` None: a uuid4 hex; ``roots``: its additional directories); an attached
        id: ``SessionAlreadyExistsError``."""
        session_id = session_id if session_id is not None else uuid.uuid4().hex
        if session_id in self._sessions:
            raise SessionAlreadyExistsError(session_id)
        entry = SessionEntry(
            session_id,
            cwd,
            conversation,
            title,
            journal=journal,
            synced=synced,
            mode=self._rules.mode_of(mode),
            model=model,
            on_change=self._settings_changed,
            tools=None if self._tools is None else self._tools.copy(),
        )
        entry.additional_directories = roots
        if self.checkpoints is not None:
            entry.checkpoints = self.checkpoints.session(session_id)
        self._sessions[session_id] = entry
        return entry

    def add_stored(self, snapshot: SessionSnapshot, cwd: str | None, journal: SessionStore) -> SessionEntry:
        """Attach a stored session as read (``cwd``: the client's now; None: the stored one): the stored messages
        up to the first one not final, its latest compaction when it covers no more, its title, mode, model and
        additional directories."""
        messages = snapshot.messages
        synced = next((i for i, message in enumerate(messages) if not message.final), len(messages))
        record = snapshot.record
        compaction = snapshot.compaction if snapshot.compaction and snapshot.compaction.through <= synced else None
        entry = self.add(
            cwd if cwd is not None else record.cwd,
            record.session_id,
            Conversation([message.to_message() for message in messages[:synced]], compaction),
            record.title,
            journal=journal,
            synced=synced,
            mode=record.mode,
            model=record.model,
            roots=record.additional_directories,
        )
        entry.created_at, entry.updated_at = record.created_at, record.updated_at
        entry.rewinds = list(snapshot.rewinds)
        entry.system_prompt = record.system_prompt
        return entry

    async def drop_checkpoints(self, session_id: str) -> None:
        """Remove a deleted session's checkpoints."""
        if self.checkpoints is not None:
            await self.checkpoints.remove(session_id)

    def close_checkpoints(self) -> None:
        """The bridge closes: a temporary checkpoint directory goes with it."""
        if self.checkpoints is not None:
            self.checkpoints.close()

    def discard(self, entry: SessionEntry) -> bool:
        """Detach ``entry`` quietly (no listener is told) if it is the one attached under its id; True if it was."""
        if self._sessions.get(entry.session_id) is not entry:
            return False
        del self._sessions[entry.session_id]
        return True

    def close(self, entry: SessionEntry) -> PromptJob | None:
        """Detach ``entry`` (attached): its prompts and forks settle with ``SessionClosedError``, then the close
        listeners are told. Returns its running prompt, still unwinding (None: none ran)."""
        del self._sessions[entry.session_id]
        running = entry.shutdown(Cause.SESSION_CLOSED)
        for listener in list(self._close_listeners):
            listener(entry.session_id)
        return running

    def clear(self) -> list[SessionEntry]:
        """Detach every session (the bridge is closing; no listener is told) and return them, oldest first."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        return sessions

    @contextmanager
    def deleting(self, session_id: str) -> Iterator[None]:
        """Mark ``session_id`` as being deleted while the block runs (see :meth:`is_deleting`)."""
        self._deleting[session_id] += 1
        try:
            yield
        finally:
            self._deleting -= Counter({session_id: 1})  # drops the key at zero

    def is_deleting(self, session_id: str) -> bool:
        """Whether a delete of ``session_id`` is in progress: a load or resume then finds nothing."""
        return self._deleting[session_id] > 0

    # -- listeners -------------------------------------------------------------------------------------------

    def add_close_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(session_id)`` each time :meth:`close` detaches a session, whichever face asked
        (synchronously, right after the detach, before its running prompt has unwound); returns the remover.

        Invariant: every detach by ``close`` is told to every listener added before it, exactly once; a
        listener must not raise or block (an exception is not caught: it would fail that close).
        """
        self._close_listeners.append(listener)

        def remove() -> None:
            if listener in self._close_listeners:
                self._close_listeners.remove(listener)

        return remove

    def add_settings_listener(self, listener: SettingsListener) -> Callable[[], None]:
        """Call ``listener(change)`` for each change of an attached session's mode, model or title, whichever face
        made it (synchronously, right after it is stored and in memory, before the call that made it returns);
        returns the remover.

        Invariant: every real change (not the value it had) is told to every listener added before it, exactly once,
        in the order of the changes; a listener must not raise or block (an exception is not caught: it would fail
        the call that made the change).
        """
        self._settings_listeners.append(listener)

        def remove() -> None:
            if listener in self._settings_listeners:
                self._settings_listeners.remove(listener)

        return remove

    def add_commands_listener(self, listener: Callable[[SessionEntry], None]) -> Callable[[], None]:
        """Call ``listener(session)`` each time an attached session's commands may have changed (its MCP servers'
        prompts listed, re-listed, gone or back; synchronously, from the MCP connection's task); returns the
        remover. A listener must not raise or block."""
        self._commands_listeners.append(listener)

        def remove() -> None:
            if listener in self._commands_listeners:
                self._commands_listeners.remove(listener)

        return remove

    def commands_changed(self, session: SessionEntry) -> None:
        """Tell the commands listeners that ``session``'s commands changed (nothing when it is not attached)."""
        if self._sessions.get(session.session_id) is not session:
            return
        for listener in list(self._commands_listeners):
            listener(session)

    def _settings_changed(self, change: SettingsChange) -> None:
        if self._sessions.get(change.session_id) is not change.session:
            return  # a session detached meanwhile (its store write finished after the close): nobody is attached
        for listener in list(self._settings_listeners):
            listener(change)
