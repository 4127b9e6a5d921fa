"""The session bridge: sessions, a prompt FIFO per session, synchronous admission, slots, deadlines, fork.

The bridge coordinates; the pieces own their state: :class:`~._session.SessionEntry` (a session and its journal),
:class:`~._fifo.Fifo` (its queue and counts), :class:`~._prompt.PromptJob` (one prompt's life) and
:class:`~._stream.PromptStream` (one prompt's events).

Invariants:
- ``pending_prompt_count`` = prompts waiting in the session's FIFO + the one running; admission refuses
  when it has reached the limit; every accepted prompt releases its slot exactly once, as it settles.
- Per session, one worker runs FIFO items strictly one at a time, in order; sessions run concurrently.
- Every admitted prompt's event stream ends with exactly one outcome, and a prompt's stream ends before the next
  prompt of its session starts.
- Every task belongs to the bridge's task group; nothing is started before ``__aenter__``.
- ``create_session`` makes an unjournaled, memory-only session (tests, embedding); every other way in is journaled.
- A journaled session is attached only once the store has let this bridge claim it (``SessionStore.claim``: one live
  owner per session with PostgreSQL), and released when it is detached or the bridge closes.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import os
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from ..domain import Conversation, Emit, Prompt, StopReason
from ..errors import ServerError
from ..store import (
    DEFAULT_PAGE_SIZE,
    MemorySessionStore,
    SessionPage,
    SessionStore,
    StoredMessage,
    StoredSessionNotFoundError,
)
from ..tasks import Lifecycle, OwnedTaskGroup
from ..tools.mcp_servers import McpServerConfig, McpServers, McpSettings
from ._commands import Command, SlashCommands
from ._exceptions import (
    BridgeClosedError,
    InvalidCwdError,
    PromptQueueFullError,
    SessionAlreadyExistsError,
    SessionClosedError,
    SessionNotFoundError,
)
from ._fifo import Fifo
from ._limits import validate_deadline_ms, validate_max_pending
from ._mcp import check_mcp_servers
from ._prompt import Cause, PromptHandle, PromptJob
from ._session import ForkRequest, SessionEntry, SettingsChange, now
from ._stream import DEFAULT_STREAM_CAPACITY, PromptStream

if TYPE_CHECKING:
    from ..tools import ToolClient
    from ..turn import ModelCatalog

__all__ = ["SessionBridge", "SettingsListener", "TurnRunner"]

SettingsListener = Callable[[SettingsChange], None]
"""Told each change of a session's mode, model or title (see :meth:`SessionBridge.add_settings_listener`)."""


class TurnRunner(Protocol):
    """Runs one prompt against a session's conversation, sending its events in order; returns the stop reason.

    ``emit`` is the writing end of the prompt's event stream: awaiting it is the reader's backpressure. ``client``
    is the editor side of the prompt's tool calls (None: the prompt came from a face with no one to ask). The
    runner runs under the prompt's cancel scope and must let cancellation propagate (clean up, then re-raise).
    """

    async def __call__(
        self, session: SessionEntry, prompt: Prompt, emit: Emit, client: ToolClient | None, /
    ) -> StopReason: ...


def _check_cwd(cwd: str | None) -> None:
    """A session's working directory is an absolute path (None: not given)."""
    if cwd is not None and not os.path.isabs(cwd):
        raise InvalidCwdError(cwd)


class SessionBridge:
    """Sessions and their prompt FIFOs; the one admission authority. Lifecycle: unopened → open → closed.

    ``send_prompt`` is synchronous so admission errors raise before any transport answers "accepted".
    """

    def __init__(
        self,
        runner: TurnRunner,
        *,
        store: SessionStore | None = None,
        max_pending_prompts_per_session: int | float | None = 5,
        prompt_deadline_ms: int | None = None,
        stream_capacity: int = DEFAULT_STREAM_CAPACITY,
        coalesce_bytes: int = 0,
        default_mode: str = "default",
        modes: Collection[str] | None = None,
        models: ModelCatalog | None = None,
        mcp: McpSettings | None = None,
    ) -> None:
        """``store``: where journaled sessions live, opened and closed by the caller; None = a private
        in-memory store the bridge opens and closes itself. ``stream_capacity``: turn events a prompt's stream
        buffers before its turn waits for the reader; ``coalesce_bytes``: how much text consecutive chunks waiting for
        a slow reader may merge into (0: never merge; see :class:`PromptStream`). ``default_mode``: the mode a new
        session starts in (stored with it) and the mode of a stored session that has none; ``modes``: the modes a
        session may have here (a stored one not among them reads as the default: a mode the server no longer allows
        is never applied). None: any. ``models``: the models a session may pick (the runner's catalog; None: the
        runner has no model choice to offer). ``mcp``: the sessions' MCP connect and call timeouts."""
        self._runner = SlashCommands(runner, self)  # a prompt naming a slash command runs it instead of the model
        self._mcp = McpSettings() if mcp is None else mcp
        self._closing_mcp: list[McpServers] = []
        self._own_store = store is None
        self._store: SessionStore = MemorySessionStore() if store is None else store
        self._limit = validate_max_pending(max_pending_prompts_per_session)
        self._deadline_ms = validate_deadline_ms(prompt_deadline_ms)
        if stream_capacity < 1:
            raise ValueError(f"stream_capacity must be >= 1; got {stream_capacity!r}")
        self._stream_capacity = stream_capacity
        if coalesce_bytes < 0:
            raise ValueError(f"coalesce_bytes must be >= 0; got {coalesce_bytes!r}")
        self._coalesce_bytes = coalesce_bytes
        self._default_mode = default_mode
        self._modes = None if modes is None else frozenset(modes)
        self._models = models
        self._life = Lifecycle.UNOPENED
        self._tasks = OwnedTaskGroup()
        self._sessions: dict[str, SessionEntry] = {}
        self._keys = 0
        self._deadlines: list[tuple[float, int]] = []  # (deadline, key), a heap; settled keys are skipped
        self._watched: dict[int, PromptJob] = {}  # unsettled prompts with a deadline, by key
        self._deadline_wakeup: anyio.Event | None = None
        self._reaper_scope: anyio.CancelScope | None = None
        self._closing: list[PromptJob] = []
        self._unclaim: list[str] = []  # journaled sessions detached by the close, released as the bridge exits
        self._close_listeners: list[Callable[[str], None]] = []
        self._deleting: Counter[str] = Counter()  # delete_session calls in progress by session: a load finds nothing
        self._settings_listeners: list[SettingsListener] = []

    @property
    def limit(self) -> int | None:
        """``maxPendingPromptsPerSession`` (None = unlimited)."""
        return self._limit

    @property
    def prompt_deadline_ms(self) -> int | None:
        return self._deadline_ms

    @property
    def default_mode(self) -> str:
        """The mode a new session starts in (stored with it), and the mode of a stored session that has none."""
        return self._default_mode

    def allows_mode(self, mode: str) -> bool:
        """Whether a session may be in ``mode`` here."""
        return self._modes is None or mode in self._modes

    def check_mcp_servers(self, servers: Sequence[McpServerConfig] | None) -> None:
        """Refuse what this bridge may not start (see ``_mcp.check_mcp_servers``) before anything is done."""
        check_mcp_servers(servers, self.allows_mode)

    async def _connect(self, entry: SessionEntry, servers: Sequence[McpServerConfig] | None) -> None:
        await entry.connect_mcp(servers, self._mcp, self._tasks.group)

    @property
    def commands(self) -> tuple[Command, ...]:
        """The slash commands a prompt may run (every face advertises these)."""
        return self._runner.commands

    @property
    def models(self) -> ModelCatalog | None:
        """The models a session may pick (None: no choice is offered)."""
        return self._models

    @property
    def store(self) -> SessionStore:
        return self._store

    @property
    def sessions(self) -> tuple[SessionEntry, ...]:
        """The open sessions, oldest first."""
        return tuple(self._sessions.values())

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> SessionBridge:
        if self._life is Lifecycle.OPEN:
            raise RuntimeError("SessionBridge is already open")
        if self._life is Lifecycle.CLOSED:
            raise RuntimeError("SessionBridge cannot be reopened once closed; create a new one")
        if self._own_store:
            await self._store.open()
        tg = await self._tasks.enter()
        self._life = Lifecycle.OPEN
        self._deadline_wakeup = anyio.Event()
        self._reaper_scope = anyio.CancelScope()
        tg.start_soon(self._reap_deadlines, self._reaper_scope, name="SessionBridge deadline reaper")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Close, then leave the task group once the interrupted prompts have unwound.

        A body error propagates unchanged (not wrapped in an exception group); cancellation goes to the group.
        """
        self._begin_close()
        try:
            return await self._tasks.exit(exc_type, exc, tb)
        finally:
            await self._release_all()
            if self._own_store:
                await self._store.aclose()

    async def aclose(self) -> None:
        """Close every session (prompts settle with ``BridgeClosedError``); wait for running ones to unwind.

        Idempotent; safe to call inside ``async with`` (the task group itself is left by ``__aexit__``).
        """
        self._begin_close()
        for job in self._closing:
            await job.wait()
        for servers in self._closing_mcp:
            await servers.aclose()

    async def _drop_claim(self, session_id: str) -> None:
        """Release a session claimed for an attach that did not happen (shielded; a store error is not this caller's:
        the lock then goes with the store's connection)."""
        with anyio.CancelScope(shield=True), contextlib.suppress(ServerError):
            await self._store.release(session_id)

    async def _release_all(self) -> None:
        """Release every journaled session the close detached (their prompts have unwound). A store error stops it,
        quietly: the store's connection is then broken or closing, and its locks go with it."""
        unclaim, self._unclaim = self._unclaim, []
        for session_id in unclaim:
            try:
                await self._store.release(session_id)
            except ServerError:
                break

    def _begin_close(self) -> None:
        if self._life is Lifecycle.CLOSED:
            return
        was_open = self._life is Lifecycle.OPEN
        self._life = Lifecycle.CLOSED
        if not was_open:
            return
        sessions = list(self._sessions.values())
        self._sessions.clear()
        self._unclaim = [session.session_id for session in sessions if session.journal is not None]
        self._closing_mcp = [session.mcp for session in sessions if session.mcp is not None]
        for session in sessions:
            running = session.shutdown(Cause.BRIDGE_CLOSED)
            if running is not None:
                self._closing.append(running)
        if self._reaper_scope is not None:
            self._reaper_scope.cancel()

    def _check_open(self) -> TaskGroup:
        if self._life is Lifecycle.CLOSED:
            raise BridgeClosedError()
        if self._life is Lifecycle.UNOPENED:
            raise RuntimeError("SessionBridge is not open; use 'async with SessionBridge(...)'")
        return self._tasks.group

    # -- sessions --------------------------------------------------------------------------------------------

    def create_session(
        self, cwd: str, *, session_id: str | None = None, conversation: Conversation | None = None
    ) -> SessionEntry:
        """A new memory-only session (never written to the store) with an empty (or given) conversation;
        ``session_id`` defaults to a uuid4 hex. ACP ``session/new`` uses :meth:`open_session`."""
        self._check_open()
        _check_cwd(cwd)
        return self._add_session(cwd, session_id, Conversation() if conversation is None else conversation)

    def _add_session(
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
    ) -> SessionEntry:
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
            mode=self._mode_or_default(mode),
            model=model,
            on_change=self._settings_changed,
        )
        self._sessions[session_id] = entry
        return entry

    def _mode_or_default(self, mode: str | None) -> str:
        if mode is None or (self._modes is not None and mode not in self._modes):
            return self._default_mode
        return mode

    async def open_session(
        self, cwd: str, *, mode: str | None = None, mcp_servers: Sequence[McpServerConfig] | None = None
    ) -> SessionEntry:
        """A new journaled session in ``mode`` (None: :attr:`default_mode`; one this bridge does not allow is a
        ``ValueError``): its row, with that mode, is committed to the store before it exists here, so a server
        with another default that loads it later keeps the mode it started in. It connects to ``mcp_servers``
        before it is returned (see :meth:`SessionEntry.connect_mcp`), as do loaded, resumed and forked ones."""
        self._check_open()
        _check_cwd(cwd)
        self.check_mcp_servers(mcp_servers)
        mode = self._default_mode if mode is None else mode
        if not self.allows_mode(mode):
            raise ValueError(f"mode {mode!r} is not allowed here")
        session_id = uuid.uuid4().hex
        record = await self._store.create_session(session_id, cwd, mode=mode)
        await self._store.claim(session_id)
        if self._life is not Lifecycle.OPEN:
            await self._drop_claim(session_id)
        self._check_open()
        entry = self._add_session(cwd, session_id, Conversation(), journal=self._store, mode=mode)
        entry.created_at = entry.updated_at = record.created_at
        await self._connect(entry, mcp_servers)
        return entry

    async def resume_session(
        self, session_id: str, *, cwd: str | None = None, mcp_servers: Sequence[McpServerConfig] | None = None
    ) -> SessionEntry:
        """Attach a stored session (no-op if attached); its conversation is read from the store.

        ``cwd`` (the client's working directory now) is the attached session's cwd; the stored one is kept.
        """
        self._check_open()
        _check_cwd(cwd)
        self.check_mcp_servers(mcp_servers)
        entry = self._sessions.get(session_id)
        if entry is not None:
            await self._connect(entry, mcp_servers)
            return entry
        entry, _ = await self.load_session(session_id, cwd=cwd, mcp_servers=mcp_servers)
        return entry

    async def load_session(
        self, session_id: str, *, cwd: str | None = None, mcp_servers: Sequence[McpServerConfig] | None = None
    ) -> tuple[SessionEntry, tuple[StoredMessage, ...]]:
        """Attach a stored session (if not attached) and return its whole committed history, oldest first."""
        self._check_open()
        _check_cwd(cwd)
        self.check_mcp_servers(mcp_servers)
        if session_id not in self._sessions:
            await self._store.claim(session_id)  # first: the history read below is then the last owner's final one
        try:
            snapshot = await self._store.read_session(session_id)
            self._check_open()
            if snapshot is None or self._deleting[session_id]:
                raise SessionNotFoundError(session_id)
        except BaseException:
            if session_id not in self._sessions:
                await self._drop_claim(session_id)
            raise
        entry = self._sessions.get(session_id)
        if entry is None:
            messages = snapshot.messages
            synced = next((i for i, message in enumerate(messages) if not message.final), len(messages))
            record = snapshot.record
            compaction = snapshot.compaction if snapshot.compaction and snapshot.compaction.through <= synced else None
            entry = self._add_session(
                cwd if cwd is not None else record.cwd,
                session_id,
                Conversation([message.to_message() for message in messages[:synced]], compaction),
                record.title,
                journal=self._store,
                synced=synced,
                mode=record.mode,
                model=record.model,
            )
            entry.created_at, entry.updated_at = record.created_at, record.updated_at
        await self._connect(entry, mcp_servers)
        return entry, snapshot.messages

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> SessionPage:
        """Stored sessions (attached or not), most recently updated first; see ``SessionStore.list_sessions``."""
        self._check_open()
        _check_cwd(cwd)
        return await self._store.list_sessions(cwd=cwd, cursor=cursor, limit=limit)

    def get(self, session_id: str) -> SessionEntry:
        self._check_open()
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFoundError(session_id) from None

    def add_close_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(session_id)`` each time :meth:`close_session` detaches a session, whichever face asked
        (synchronously, right after the detach, before its running prompt has unwound); returns the remover.

        Invariant: every detach by ``close_session`` is told to every listener added before it, exactly once; a
        listener must not raise or block (an exception is not caught: it would fail that ``close_session``).
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

    def _settings_changed(self, change: SettingsChange) -> None:
        if self._sessions.get(change.session_id) is not change.session:
            return  # a session detached meanwhile (its store write finished after the close): nobody is attached
        for listener in list(self._settings_listeners):
            listener(change)

    async def close_session(self, session_id: str) -> None:
        """Detach the session; its waiting and running prompts (and forks) settle with ``SessionClosedError``.

        Returns once the running prompt has unwound (its answer recorded), so the conversation is no longer being
        written. The stored history stays. Closing a stored session that is not attached is a no-op.
        """
        self._check_open()
        session = self._sessions.get(session_id)
        if session is None:
            if await self._store.get_session(session_id) is None:
                raise SessionNotFoundError(session_id)
            return
        del self._sessions[session_id]
        running = session.shutdown(Cause.SESSION_CLOSED)
        for listener in list(self._close_listeners):
            listener(session_id)
        if running is not None:
            await running.wait()
        if session.journal is not None:
            with contextlib.suppress(ServerError):  # a broken store connection took its locks with it
                await session.journal.release(session_id)  # its answer is recorded: another process may take it now
        if session.mcp is not None:
            await session.mcp.aclose()  # its servers have stopped (processes reaped)

    async def delete_session(self, session_id: str) -> None:
        """Remove the session for good: closed first as by :meth:`close_session` (its running prompt cancelled
        and unwound, its waiting ones settled), then its stored history deleted (``SessionStore.delete_session``;
        a memory-only session has none). Unknown here and in the store: ``SessionNotFoundError``. Meanwhile a
        load or resume of it finds nothing, so it never comes back half deleted."""
        entry = self._sessions.get(session_id)
        self._deleting[session_id] += 1
        try:
            await self.close_session(session_id)
            if entry is None or entry.journaled:
                await self._store.claim(session_id)  # held by another process: session_busy, nothing deleted
                try:
                    await self._store.delete_session(session_id)
                finally:
                    await self._drop_claim(session_id)
        except StoredSessionNotFoundError:
            raise SessionNotFoundError(session_id) from None  # deleted meanwhile by another face or process
        finally:
            self._deleting -= Counter({session_id: 1})  # drops the key at zero

    # -- prompts ---------------------------------------------------------------------------------------------

    def send_prompt(
        self,
        session_id: str,
        prompt: Prompt,
        *,
        deadline_ms: int | None = None,
        client: ToolClient | None = None,
        origin: object | None = None,
    ) -> PromptHandle:
        """Admit a prompt or raise, synchronously: look the session up, check the limit, then count and enqueue.

        ``deadline_ms`` can only shorten the bridge's default; the deadline runs from acceptance. The handle's
        ``events`` carry the prompt's turn events and then its outcome. ``client`` is handed to the turn runner.
        An untitled session takes the prompt's title (told to the settings listeners as asked by ``origin``).
        """
        per_prompt_ms = validate_deadline_ms(deadline_ms, "deadline_ms")
        tg = self._check_open()
        session = self.get(session_id)
        fifo = session.fifo
        if self._limit is not None and fifo.pending >= self._limit:
            raise PromptQueueFullError(session_id, self._limit, fifo.pending)

        effective_ms = min((ms for ms in (self._deadline_ms, per_prompt_ms) if ms is not None), default=None)
        deadline = anyio.current_time() + effective_ms / 1000 if effective_ms is not None else None
        job = PromptJob(
            partial(self._release, fifo),
            session_id,
            prompt,
            key=self._next_key(),
            deadline_ms=effective_ms,
            deadline=deadline,
            stream=PromptStream(self._stream_capacity, self._coalesce_bytes),
            client=client,
        )
        fifo.admit(job)
        session.updated_at = now()
        session.title_if_untitled(prompt.title, origin=origin)
        if deadline is not None:
            self._watch_deadline(deadline, job)
        self._ensure_worker(tg, session)
        return job.handle

    def cancel_session(self, session_id: str) -> bool:
        """Stop the session (ACP ``session/cancel``): see :meth:`Fifo.cancel_prompts`. True if a prompt was pending."""
        return self.get(session_id).fifo.cancel_prompts() > 0

    async def fork(
        self, session_id: str, *, cwd: str | None = None, mcp_servers: Sequence[McpServerConfig] | None = None
    ) -> SessionEntry:
        """A new session with a copy of the conversation, taken after every item queued before it; it connects its
        own ``mcp_servers`` (None: the source's).

        Serialized behind the FIFO, never counted, never refused.
        """
        tg = self._check_open()
        _check_cwd(cwd)
        self.check_mcp_servers(mcp_servers)
        session = self.get(session_id)
        request = ForkRequest(self._next_key(), cwd)
        session.fifo.enqueue_fork(request)
        self._ensure_worker(tg, session)
        try:
            await request.done.wait()
        except BaseException:
            session.fifo.withdraw(request)  # our caller left: don't fork for nobody
            request.abandoned = True
            if request.child is not None and self._sessions.get(request.child.session_id) is request.child:
                del self._sessions[request.child.session_id]
                request.child.closed_event.set()
                await self._drop_claim(request.child.session_id)
            raise
        if request.error is not None:
            raise request.error
        child = request.child
        assert child is not None
        servers = mcp_servers if mcp_servers is not None else (session.mcp.configs if session.mcp else None)
        await self._connect(child, servers)
        return child

    # -- workers ---------------------------------------------------------------------------------------------

    def _next_key(self) -> int:
        self._keys += 1
        return self._keys

    def _ensure_worker(self, tg: TaskGroup, session: SessionEntry) -> None:
        if session.fifo.claim_worker():
            tg.start_soon(self._work, session, name=f"SessionBridge worker {session.session_id}")

    async def _work(self, session: SessionEntry) -> None:
        """Run the session's FIFO items one at a time, in order, until it is empty; absorb every outcome."""
        try:
            while (item := session.fifo.take()) is not None:
                if isinstance(item, ForkRequest):
                    await self._fork_now(session, item)
                else:
                    await self._run(session, item)
                    await self._released(session, item)
                await anyio.lowlevel.checkpoint()
        except BaseException:
            # Only cancellation from outside (the host's) gets here: nothing queued may hang.
            session.shutdown(Cause.BRIDGE_CLOSED)
            raise
        finally:
            session.fifo.release_worker()

    @staticmethod
    async def _released(session: SessionEntry, job: PromptJob) -> None:
        """Hold the FIFO until the prompt's reader has taken its outcome (or left), so that the next prompt's events
        never overtake this one's on a wire they share; a session that closes holds nothing."""
        if job.stream.released:
            return
        async with anyio.create_task_group() as tg:

            async def until_closed() -> None:
                await session.closed_event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(until_closed)
            await job.stream.wait_released()
            tg.cancel_scope.cancel()

    async def _fork_now(self, session: SessionEntry, item: ForkRequest) -> None:
        """Copy the session (in the store first when journaled); always sets ``item.done``."""
        try:
            cwd = item.cwd if item.cwd is not None else session.cwd
            child_id = uuid.uuid4().hex
            mode = session.mode  # the child's mode at creation, stored with it (read once: a switch may land meanwhile)
            journal = session.journal
            if journal is not None:
                try:
                    await journal.fork_session(session.session_id, child_id, cwd=cwd, mode=mode)
                    await journal.claim(child_id)  # new: nobody else can hold it
                except ServerError as exc:
                    item.fail(exc)
                    return
            gone = self._life is not Lifecycle.OPEN or item.abandoned
            if gone or session.closed:
                item.fail(BridgeClosedError() if gone else SessionClosedError(session.session_id))
                if journal is not None:
                    await self._drop_claim(child_id)
            else:
                item.child = self._add_session(
                    cwd,
                    child_id,
                    session.conversation.fork(),
                    session.title,
                    journal=journal,
                    synced=session.synced,
                    mode=mode,
                    model=session.model,
                )
        finally:
            item.fail(BridgeClosedError())  # only counts when nothing else was decided; sets ``done``

    async def _run(self, session: SessionEntry, job: PromptJob) -> None:
        """Run one prompt under its own cancel scope (cancel, deadline, close); settle it on every exit."""
        scope = anyio.CancelScope(deadline=job.deadline if job.deadline is not None else math.inf)
        result: StopReason | None = None
        error: Exception | None = None
        try:
            with scope:
                job.start(scope)
                result = await self._runner(session, job.prompt, job.stream.send, job.client)
        except Exception as exc:  # the runner's failure belongs to this prompt's caller
            error = exc
        except BaseException:  # cancelled from outside our scope (host shutdown), or KeyboardInterrupt & co
            job.abort()
            raise
        job.finish(scope, result, error)
        session.updated_at = now()

    def _release(self, fifo: Fifo[ForkRequest], job: PromptJob) -> None:
        """A prompt settled: its FIFO releases its slot, and the deadline watch forgets it (so does memory)."""
        fifo.settle(job)
        if self._watched.pop(job.key, None) is not None and len(self._deadlines) > 2 * len(self._watched) + 64:
            self._deadlines = [entry for entry in self._deadlines if entry[1] in self._watched]
            heapq.heapify(self._deadlines)

    async def _reap_deadlines(self, scope: anyio.CancelScope) -> None:
        """Expire waiting prompts at their deadline (running ones are stopped by their own scope)."""
        with scope:
            while True:
                current = anyio.current_time()
                while self._deadlines and self._deadlines[0][0] <= current:
                    _, key = heapq.heappop(self._deadlines)
                    job = self._watched.get(key)
                    if job is not None:
                        job.expire()
                self._deadline_wakeup = wakeup = anyio.Event()
                next_deadline = self._deadlines[0][0] if self._deadlines else math.inf
                with anyio.CancelScope(deadline=next_deadline):
                    await wakeup.wait()

    def _watch_deadline(self, deadline: float, job: PromptJob) -> None:
        self._watched[job.key] = job
        heapq.heappush(self._deadlines, (deadline, job.key))
        if self._deadlines[0][1] == job.key and self._deadline_wakeup is not None:
            self._deadline_wakeup.set()

    def __repr__(self) -> str:
        return f"<SessionBridge {self._life.value} sessions={len(self._sessions)} limit={self._limit}>"
