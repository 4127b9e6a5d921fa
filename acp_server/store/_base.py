"""The session store's interface and lifecycle, shared by the SQLite store and the in-memory one.

Lifecycle: unopened → open → closed (``async with store`` or ``open()`` / ``aclose()``; ``aclose`` is idempotent).
Opening never raises for a bad database: the problem is kept in :attr:`SessionStore.problem`, logged once as an
error, and raised (as :class:`StoreUnavailableError`) by every method that needs the database, so the server still
starts and answers ``initialize``.
"""

from __future__ import annotations

import abc
import logging
from types import TracebackType
from typing import ClassVar, Self

from ..domain import Compaction, ContextUsage, ModelStep, Outcome, PromptPart, StopReason
from ..system_prompts import ClientPrompt
from ..tasks import Lifecycle
from ._exceptions import SessionBusyError, StoreClosedError, StoreError, StoreUnavailableError
from ._owner import make_instance, make_owner, owner_alive, owner_pid
from ._types import (
    DEFAULT_PAGE_SIZE,
    FinalOutcome,
    Rewind,
    SessionPage,
    SessionRecord,
    SessionSnapshot,
    TurnTicket,
    now_us,
)

__all__ = ["SessionStore"]

logger = logging.getLogger("acp_server.store")


class SessionStore(abc.ABC):
    """Sessions and their histories. Every write is one transaction; a failed call wrote nothing.

    Reads return what is committed (another process's running turn shows as a ``running`` answer). Turns are
    recorded with :meth:`begin_turn` (prompt + a pending answer, one transaction), :meth:`record_steps` (the tool
    steps so far, once per ended tool call) and :meth:`end_turn` (the answer, one transaction); see
    :mod:`acp_server.store._types` for the invariants of a history.
    """

    persistent: ClassVar[bool]

    def __init__(self) -> None:
        self._life = Lifecycle.UNOPENED
        self._problem: StoreUnavailableError | None = None
        self.owner = make_owner()
        self.instance = make_instance()  # public (``/health``, ``session_busy.instance``); never a secret
        self._live: set[tuple[str, int]] = set()  # (session, answer seq) of the turns this store is running
        self._last_us = 0

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """The database file, or ``":memory:"``."""

    @property
    def problem(self) -> StoreUnavailableError | None:
        """Why the database cannot be used, or None."""
        return self._problem

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Open the database (never raises for a bad one; see :attr:`problem`)."""
        if self._life is Lifecycle.OPEN:
            raise RuntimeError(f"{type(self).__name__} is already open")
        if self._life is Lifecycle.CLOSED:
            raise StoreClosedError()
        self._life = Lifecycle.OPEN
        problem = await self._open()
        if problem is not None:
            self._mark_unavailable(problem)

    async def aclose(self) -> None:
        """Close; waits for the call in progress (a write is never cut in half). Idempotent."""
        if self._life is Lifecycle.CLOSED:
            return
        was_open = self._life is Lifecycle.OPEN
        self._life = Lifecycle.CLOSED
        if was_open:
            await self._close()

    async def health(self) -> StoreError | None:
        """None while the store can be used (``GET /health`` answers ok); else why not — unavailable, closed, or (a
        database server) not reachable now. A store with a server asks it (PostgreSQL: a round trip on each
        connection, a lost one made again), so the answer is the truth of this moment and turns ok again by itself."""
        try:
            self._check()
        except StoreError as exc:
            return exc
        return None

    def _mark_unavailable(self, problem: StoreUnavailableError) -> None:
        if self._problem is None:
            self._problem = problem
            logger.error("%s", problem)

    def _check(self) -> None:
        if self._life is Lifecycle.UNOPENED:
            raise RuntimeError(f"{type(self).__name__} is not open; use 'async with' or 'await store.open()'")
        if self._life is Lifecycle.CLOSED:
            raise StoreClosedError()
        if self._problem is not None:
            raise self._problem

    def _tick(self) -> int:
        """A timestamp strictly after the previous one of this store (the list order stays the creation order)."""
        self._last_us = max(now_us(), self._last_us + 1)
        return self._last_us

    def _pending_outcome(self, owner: str | None, session_id: str, seq: int) -> Outcome:
        """How a pending answer reads: ``running`` while its turn may still end, ``interrupted`` otherwise."""
        if owner == self.owner:
            return "running" if (session_id, seq) in self._live else "interrupted"
        return "running" if owner_alive(owner) else "interrupted"

    def _refuse_running(self, session_id: str, pending: list[tuple[int, str | None]]) -> None:
        """Raise :class:`SessionBusyError` if one of the session's pending answers (``(seq, owner)``) still runs,
        here or in another live process: a running turn's history is never rewritten under it."""
        for seq, owner in pending:
            if self._pending_outcome(owner, session_id, seq) == "running":
                raise SessionBusyError(session_id, owner_pid(owner))

    @abc.abstractmethod
    async def _open(self) -> StoreUnavailableError | None: ...

    @abc.abstractmethod
    async def _close(self) -> None: ...

    # -- ownership -------------------------------------------------------------------------------------------

    async def claim(self, session_id: str) -> None:
        """Make this store the one live owner of the session before a face attaches it, or raise
        :class:`SessionBusyError` naming the holder's :attr:`instance`. Idempotent. Here: nothing to claim (SQLite and
        memory share a session between processes turn by turn, see :meth:`begin_turn`); PostgreSQL overrides it."""
        self._check()

    async def release(self, session_id: str) -> None:
        """Give up what :meth:`claim` took (the session was detached); a no-op for a session not claimed here."""
        del session_id  # nothing was taken here

    # -- sessions --------------------------------------------------------------------------------------------

    @abc.abstractmethod
    async def create_session(
        self,
        session_id: str,
        cwd: str,
        *,
        mode: str | None = None,
        additional_directories: tuple[str, ...] = (),
        task_of: str | None = None,
    ) -> SessionRecord:
        """Record a new, empty session (``session/new``) with its mode and additional directories (in the same
        transaction: a session never exists without the mode it started in; None only for callers that have no
        mode to give). ``task_of``: the parent of a subagent child (see :attr:`SessionRecord.task_of`)."""

    @abc.abstractmethod
    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    @abc.abstractmethod
    async def read_session(self, session_id: str) -> SessionSnapshot | None:
        """The session and its whole history, oldest first, from one consistent read; None if unknown."""

    @abc.abstractmethod
    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> SessionPage:
        """Sessions (of ``cwd`` if given), most recently updated first, ``limit`` per page (keyset cursor)."""

    @abc.abstractmethod
    async def list_children(self, session_id: str) -> tuple[SessionRecord, ...]:
        """The subagent children of ``session_id`` (those whose ``task_of`` names it), oldest first; never in
        :meth:`list_sessions`."""

    @abc.abstractmethod
    async def fork_session(
        self,
        source_id: str,
        session_id: str,
        *,
        cwd: str,
        mode: str | None = None,
        additional_directories: tuple[str, ...] = (),
    ) -> SessionRecord:
        """A new session with a copy of the source's history (steps included), title, mode and model; a pending
        answer is copied as ``interrupted``. ``mode``: the new session's mode (None: the source's stored one);
        ``additional_directories``: the new session's own (never the source's: a fork request names its list)."""

    @abc.abstractmethod
    async def delete_session(self, session_id: str) -> None:
        """One transaction: remove the session with its whole history (messages, steps, compactions); a fork of
        it keeps its own copy; its subagent children go with it.
        An unknown session raises :class:`StoredSessionNotFoundError`; one whose turn still
        runs (here or in another live process) raises :class:`SessionBusyError`; either way nothing is removed."""

    @abc.abstractmethod
    async def set_mode(self, session_id: str, mode: str) -> None:
        """Store the session's mode id (one transaction; ``updated`` is not touched: a setting is not activity).
        An unknown session raises :class:`StoredSessionNotFoundError`."""

    @abc.abstractmethod
    async def set_model(self, session_id: str, model: str | None) -> None:
        """Store the session's model name (None: back to the server's default), like :meth:`set_mode`."""

    @abc.abstractmethod
    async def set_additional_directories(self, session_id: str, directories: tuple[str, ...]) -> None:
        """Store the session's additional directories (a load or resume activates a list), like :meth:`set_mode`."""

    @abc.abstractmethod
    async def set_system_prompt(self, session_id: str, prompt: ClientPrompt | None) -> None:
        """Store the client's system prompt of the session (None: none), like :meth:`set_mode`."""

    @abc.abstractmethod
    async def set_title(self, session_id: str, title: str) -> None:
        """Store the session's title (``''`` clears it: the next prompt titles it again), like :meth:`set_mode`."""

    # -- turns -----------------------------------------------------------------------------------------------

    @abc.abstractmethod
    async def begin_turn(
        self, session_id: str, *, known: int, content: str, parts: tuple[PromptPart, ...], title: str
    ) -> TurnTicket:
        """One transaction: refuse if another live process runs a turn of this session (``SessionBusyError``);
        mark answers of dead turns ``interrupted``; read the messages after ``known``; append the prompt and a
        pending answer; set the title if it is still empty (the ticket has the title it leaves); touch ``updated``.
        """

    @abc.abstractmethod
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
        """One transaction: write the answer reserved by ``begin_turn`` with what was streamed and how it ended;
        ``steps`` (all of them) replace what :meth:`record_steps` wrote; ``usage``: the size of its last request.
        Refused with :class:`StoreIOError` if the answer is no longer pending under this store (another process
        took it over)."""

    @abc.abstractmethod
    async def record_steps(self, ticket: TurnTicket, steps: tuple[ModelStep, ...]) -> None:
        """One transaction: the pending answer's steps become ``steps`` (all of them so far: earlier steps unchanged,
        the last one with more calls — a store may write only what is new); the answer stays pending and this
        store's. Refused like :meth:`end_turn` once the answer is no longer pending here."""

    @abc.abstractmethod
    async def record_compaction(self, session_id: str, compaction: Compaction) -> None:
        """One transaction: keep ``compaction`` as the session's latest (the history is not touched). Refused with
        :class:`StoreIOError` when it summarises messages the session does not have, or not whole turns (``through``
        odd, or not after the latest one); an unknown session raises :class:`StoredSessionNotFoundError`."""

    @abc.abstractmethod
    async def record_rewind(self, session_id: str, rewind: Rewind) -> None:
        """One transaction: keep ``rewind`` (``/rewind``: messages ``start..through`` out of what the model sees; the
        history is not touched). An unknown session raises :class:`StoredSessionNotFoundError`."""

    def __repr__(self) -> str:
        state = "unavailable" if self._problem is not None else self._life.value
        return f"<{type(self).__name__} {self.location} {state}>"
