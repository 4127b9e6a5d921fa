"""The session bridge: sessions, a prompt FIFO per session, synchronous admission, slots, deadlines, fork.

The bridge coordinates; the pieces own their state: :class:`~._registry.SessionRegistry` (the attached sessions,
their listeners, their checkpoints' directory), :class:`~._session.SessionEntry` (a session, its journal and
checkpoints), :class:`~._fifo.Fifo` (its queue), :class:`~._prompt.PromptJob` (a prompt's life),
:class:`~._stream.PromptStream` (its events), :func:`~._worker.work` (a session's worker), :class:`~._fork.Forks`
(copies), :class:`~._deadlines.DeadlineWatch` (the deadline reaper), :class:`~._claims.Claims` (releasing claims).

Invariants:
- ``pending_prompt_count`` = prompts waiting in the session's FIFO + the one running; admission refuses
  when it has reached the limit; every accepted prompt releases its slot exactly once, as it settles.
- Per session, one worker runs FIFO items strictly one at a time, in order; sessions run concurrently.
- Every admitted prompt's event stream ends with exactly one outcome, and a prompt's stream ends before the next
  prompt of its session starts.
- Every task belongs to the bridge's task group; nothing starts before ``__aenter__``.
- ``create_session`` makes an unjournaled, memory-only session; any other is journaled, attached only once the store
  let this bridge claim it (one live owner per session with PostgreSQL), released when detached or at close.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from ..checkpoints import CheckpointRoot
from ..commands import Command, CommandFiles, SlashCommands
from ..domain import Conversation, Prompt
from ..limits import DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION
from ..mcp import McpServerConfig, McpServers, McpSettings, check_mcp_servers
from ..modes import DEFAULT_MODE
from ..store import (
    DEFAULT_PAGE_SIZE,
    MemorySessionStore,
    SessionPage,
    SessionStore,
    StoredMessage,
    StoredSessionNotFoundError,
)
from ..system_prompts import ClientPrompt
from ..tasks import Lifecycle, OwnedTaskGroup
from ._claims import Claims
from ._deadlines import DeadlineWatch
from ._exceptions import BridgeClosedError, PromptQueueFullError, SessionNotFoundError, SubagentSessionError
from ._fifo import Fifo
from ._fork import Forks
from ._limits import validate_deadline_ms, validate_max_pending
from ._prompt import Cause, PromptHandle, PromptJob
from ._registry import SessionRegistry, SettingsListener
from ._roots import Directories, active_directories, check_additional_directories
from ._roots import check_cwd as _check_cwd
from ._session import ForkRequest, SessionEntry, now
from ._settings import Choice, SettingsRules
from ._stream import DEFAULT_STREAM_CAPACITY, PromptStream
from ._worker import TurnRunner, work

if TYPE_CHECKING:
    from ..tools import ToolClient, ToolSet
    from ..turn import ModelCatalog

__all__ = ["SessionBridge", "SettingsListener", "TurnRunner"]

Servers = Sequence[McpServerConfig] | None  # a session's MCP servers as a face gives them (None: none given)
Prompted = ClientPrompt | None  # a client's system prompt as a face gives it (None: none given)


class SessionBridge:
    """Sessions and their prompt FIFOs; the one admission authority. Lifecycle: unopened → open → closed.

    ``send_prompt`` is synchronous so admission errors raise before any transport answers "accepted".
    """

    def __init__(
        self,
        runner: TurnRunner,
        *,
        store: SessionStore | None = None,
        max_pending_prompts_per_session: int | float | None = DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION,
        prompt_deadline_ms: int | None = None,
        stream_capacity: int = DEFAULT_STREAM_CAPACITY,
        coalesce_bytes: int = 0,
        default_mode: str = DEFAULT_MODE,
        modes: Collection[str] | None = None,
        models: ModelCatalog | None = None,
        mcp: McpSettings | None = None,
        tools: ToolSet | None = None,
        commands: CommandFiles | None = None,
    ) -> None:
        """``store``: where journaled sessions live, opened and closed by the caller; None = a private in-memory
        store the bridge opens and closes itself. ``stream_capacity``: turn events a prompt's stream buffers before
        its turn waits for the reader; ``coalesce_bytes``: how much text consecutive chunks waiting for a slow reader
        may merge into (0: never merge; see :class:`PromptStream`). ``default_mode``: the mode a new session starts
        in (and a stored session without one); ``modes``: the modes a session may have here (None: any; a stored one
        not among them reads as the default). ``models``: the models a session may pick (None: no choice). ``mcp``:
        MCP timeouts; ``tools``: the built-in tools (None: the defaults); ``commands``: the user's command files."""
        self._runner = SlashCommands(runner, self, files=commands, changed=lambda e: self._sessions.commands_changed(e))
        self._model_runner = runner
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
        self._rules = SettingsRules(default_mode, modes, models)
        self._life = Lifecycle.UNOPENED
        self._tasks = OwnedTaskGroup()
        self._sessions = SessionRegistry(self._rules, tools, CheckpointRoot.beside(self._store.location))
        self._keys = 0
        self._deadlines = DeadlineWatch()
        self._claims = Claims(self._store)
        self._forks = Forks(self._sessions, self._claims, lambda: self._life is Lifecycle.OPEN)
        self._closing: list[PromptJob] = []

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
        return self._rules.default_mode

    def allows_mode(self, mode: str) -> bool:
        """Whether a session may be in ``mode`` here."""
        return self._rules.allows_mode(mode)

    @property
    def settings(self) -> SettingsRules:
        """The one owner of what a session's mode and model may be here (every face checks through it)."""
        return self._rules

    async def change_setting(
        self,
        session_id: str,
        choice: Choice,
        *,
        origin: object | None = None,
        before: Callable[[str], object] | None = None,
    ) -> SessionEntry:
        """Store a choice :attr:`settings` checked (``config_choice``, ``mode_choice``): :meth:`SettingsRules.apply`."""
        return await self._rules.apply(self.get, session_id, choice, origin=origin, before=before)

    def _check_request(self, cwd: str | None, servers: Servers, directories: Directories) -> tuple[str, ...] | None:
        """What every way in checks before it does anything: open, an absolute cwd, the additional directories
        (returned checked), the MCP servers."""
        self._check_open()
        _check_cwd(cwd)
        checked = check_additional_directories(directories)
        self.check_mcp_servers(servers)
        return checked

    def check_mcp_servers(self, servers: Sequence[McpServerConfig] | None) -> None:
        """Refuse what this bridge may not start (see :func:`acp_server.mcp.check_mcp_servers`) first."""
        check_mcp_servers(servers, self.allows_mode)

    async def _connect(self, entry: SessionEntry, servers: Sequence[McpServerConfig] | None) -> None:
        await entry.connect_mcp(servers, self._mcp, self._tasks.group, partial(self._sessions.commands_changed, entry))

    @property
    def commands(self) -> tuple[Command, ...]:
        """The built-in slash commands (every session offers these)."""
        return self._runner.commands

    def commands_of(self, entry: SessionEntry) -> tuple[Command, ...]:
        """The slash commands a prompt of ``entry`` may run now: the built-ins, then its MCP servers' prompts."""
        return self._runner.commands_of(entry)

    async def window_problem(self, entry: SessionEntry) -> Exception | None:
        """Why no prompt of ``entry`` can work with its model's window, when the model runner tells; else None."""
        return None if (check := getattr(self._model_runner, "window_problem", None)) is None else await check(entry)

    def add_commands_listener(self, listener: Callable[[SessionEntry], None]) -> Callable[[], None]:
        """Call ``listener(session)`` when a session's commands change; returns the remover (see ``_registry``)."""
        return self._sessions.add_commands_listener(listener)

    @property
    def models(self) -> ModelCatalog | None:
        """The models a session may pick (None: no choice is offered)."""
        return self._rules.models

    @property
    def store(self) -> SessionStore:
        return self._store

    @property
    def sessions(self) -> tuple[SessionEntry, ...]:
        """The open sessions, oldest first."""
        return self._sessions.sessions

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
        self._deadlines.start(tg)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Close, then leave the task group once the interrupted prompts have unwound. A body error propagates
        unchanged (not wrapped in an exception group); cancellation goes to the group."""
        self._begin_close()
        try:
            return await self._tasks.exit(exc_type, exc, tb)
        finally:
            await self._claims.release_deferred()
            self._sessions.close_checkpoints()
            if self._own_store:
                await self._store.aclose()

    async def aclose(self) -> None:
        """Close every session (prompts settle with ``BridgeClosedError``); wait for running ones to unwind.
        Idempotent; safe to call inside ``async with`` (the task group itself is left by ``__aexit__``)."""
        self._begin_close()
        for job in self._closing:
            await job.wait()
        for servers in self._closing_mcp:
            await servers.aclose()

    def _begin_close(self) -> None:
        if self._life is Lifecycle.CLOSED:
            return
        was_open = self._life is Lifecycle.OPEN
        self._life = Lifecycle.CLOSED
        if not was_open:
            return
        sessions = self._sessions.clear()
        self._claims.defer(sessions)
        self._closing_mcp = [session.mcp for session in sessions if session.mcp is not None]
        for session in sessions:
            running = session.shutdown(Cause.BRIDGE_CLOSED)
            if running is not None:
                self._closing.append(running)
        self._deadlines.stop()

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
        self._check_request(cwd, None, None)
        return self._sessions.add(cwd, session_id, Conversation() if conversation is None else conversation)

    async def open_session(
        self, cwd: str, *, mode: str | None = None, mcp_servers: Servers = None,
        additional_directories: Directories = None, system_prompt: Prompted = None,
    ) -> SessionEntry:
        """A new journaled session in ``mode`` (None: :attr:`default_mode`; one not allowed: ``ValueError``), its
        row committed with that mode before it exists here (a server with another default keeps it); connected to
        ``mcp_servers`` before it is returned, as loaded, resumed and forked ones are. ``additional_directories``:
        its further roots (``_roots.py``: checked first); ``system_prompt``: the client's."""
        directories = active_directories(cwd, self._check_request(cwd, mcp_servers, additional_directories) or ())
        mode = self.default_mode if mode is None else mode
        if not self.allows_mode(mode):
            raise ValueError(f"mode {mode!r} is not allowed here")
        session_id = uuid.uuid4().hex
        record = await self._store.create_session(session_id, cwd, mode=mode, additional_directories=directories)
        await self._store.claim(session_id)
        if self._life is not Lifecycle.OPEN:
            await self._claims.drop(session_id)
        self._check_open()
        entry = self._sessions.add(cwd, session_id, Conversation(), journal=self._store, mode=mode, roots=directories)
        entry.created_at = entry.updated_at = record.created_at
        await entry.activate(None, system_prompt)
        await self._connect(entry, mcp_servers)
        return entry

    async def resume_session(
        self, session_id: str, *, cwd: str | None = None, mcp_servers: Servers = None,
        additional_directories: Directories = None, system_prompt: Prompted = None,
    ) -> SessionEntry:
        """Attach a stored session (no-op if attached); its conversation is read from the store.

        ``cwd`` (the client's working directory now) is the attached session's cwd; the stored one is kept.
        ``additional_directories`` (None: keep the session's) is its whole list from now on, stored; so is the
        client's ``system_prompt`` (None: keep the session's)."""
        directories = self._check_request(cwd, mcp_servers, additional_directories)
        entry = self._sessions.find(session_id)
        if entry is not None:
            await entry.activate(directories, system_prompt)
            await self._connect(entry, mcp_servers)
            return entry
        return (await self._load(session_id, cwd, mcp_servers, directories, system_prompt))[0]

    async def load_session(
        self, session_id: str, *, cwd: str | None = None, mcp_servers: Servers = None,
        additional_directories: Directories = None, system_prompt: Prompted = None,
    ) -> tuple[SessionEntry, tuple[StoredMessage, ...]]:
        """Attach a stored session (if not attached) and return its whole committed history, oldest first;
        ``additional_directories`` and ``system_prompt`` as for :meth:`resume_session`."""
        directories = self._check_request(cwd, mcp_servers, additional_directories)
        return await self._load(session_id, cwd, mcp_servers, directories, system_prompt)

    async def _load(
        self, session_id: str, cwd: str | None, mcp_servers: Servers, directories: tuple[str, ...] | None,
        prompt: Prompted,
    ) -> tuple[SessionEntry, tuple[StoredMessage, ...]]:
        if session_id not in self._sessions:
            await self._store.claim(session_id)  # first: the history read below is then the last owner's final one
        try:
            snapshot = await self._store.read_session(session_id)
            self._check_open()
            if snapshot is None or self._sessions.is_deleting(session_id):
                raise SessionNotFoundError(session_id)
            if snapshot.record.task_of is not None:  # shown under its parent, run only by its parent's task call
                raise SubagentSessionError(session_id, snapshot.record.task_of)
        except BaseException:
            if session_id not in self._sessions:
                await self._claims.drop(session_id)
            raise
        entry = self._sessions.find(session_id)
        if entry is None:
            entry = self._sessions.add_stored(snapshot, cwd, self._store)
        await entry.activate(directories, prompt)
        await self._connect(entry, mcp_servers)
        return entry, snapshot.messages

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> SessionPage:
        """Stored sessions (attached or not), most recently updated first; see ``SessionStore.list_sessions``."""
        self._check_request(cwd, None, None)
        return await self._store.list_sessions(cwd=cwd, cursor=cursor, limit=limit)

    def get(self, session_id: str) -> SessionEntry:
        self._check_open()
        return self._sessions.get(session_id)

    def add_close_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(session_id)`` when :meth:`close_session` detaches a session; returns the remover."""
        return self._sessions.add_close_listener(listener)

    def add_settings_listener(self, listener: SettingsListener) -> Callable[[], None]:
        """Call ``listener(change)`` for each change of a session's mode, model or title; returns the remover."""
        return self._sessions.add_settings_listener(listener)

    async def close_session(self, session_id: str) -> None:
        """Detach the session; its waiting and running prompts (and forks) settle with ``SessionClosedError``.

        Returns once the running prompt has unwound (its answer recorded), so the conversation is no longer being
        written. The stored history stays. Closing a stored session that is not attached is a no-op."""
        self._check_open()
        session = self._sessions.find(session_id)
        if session is None:
            if await self._store.get_session(session_id) is None:
                raise SessionNotFoundError(session_id)
            return
        running = self._sessions.close(session)
        if running is not None:
            await running.wait()
        await self._claims.release(session)  # its answer is recorded: another process may take it now
        if session.mcp is not None:
            await session.mcp.aclose()  # its servers have stopped (processes reaped)

    async def delete_session(self, session_id: str) -> None:
        """Remove the session for good: closed first as by :meth:`close_session` (its running prompt cancelled
        and unwound, its waiting ones settled), then its stored history deleted (``SessionStore.delete_session``;
        a memory-only session has none), then its checkpoints. Unknown here and in the store:
        ``SessionNotFoundError``. Meanwhile a load or resume of it finds nothing: it never comes back half deleted."""
        entry = self._sessions.find(session_id)
        with self._sessions.deleting(session_id):
            try:
                await self.close_session(session_id)
                if entry is None or entry.journaled:
                    await self._store.claim(session_id)  # held by another process: session_busy, nothing deleted
                    try:
                        await self._store.delete_session(session_id)
                    finally:
                        await self._claims.drop(session_id)
                await self._sessions.drop_checkpoints(session_id)
            except StoredSessionNotFoundError:
                raise SessionNotFoundError(session_id) from None  # deleted meanwhile by another face or process

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
        An untitled session takes the prompt's title (told to the settings listeners as asked by ``origin``)."""
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
            self._deadlines.watch(deadline, job)
        self._ensure_worker(tg, session)
        return job.handle

    def cancel_session(self, session_id: str) -> bool:
        """Stop the session (ACP ``session/cancel``): see :meth:`Fifo.cancel_prompts`. True if a prompt was pending."""
        return self.get(session_id).fifo.cancel_prompts() > 0

    def _release(self, fifo: Fifo[ForkRequest], job: PromptJob) -> None:
        """A prompt settled: its FIFO releases its slot, and the deadline watch forgets it (so does memory)."""
        fifo.settle(job)
        self._deadlines.forget(job)

    async def fork(
        self, session_id: str, *, cwd: str | None = None, mcp_servers: Servers = None,
        additional_directories: Directories = None, system_prompt: Prompted = None,
    ) -> SessionEntry:
        """A new session with a copy of the conversation, taken after every item queued before it; it connects its
        ``mcp_servers``, ``additional_directories`` and client's ``system_prompt`` (each None: the source's).

        Serialized behind the FIFO, never counted, never refused.
        """
        directories = self._check_request(cwd, mcp_servers, additional_directories)
        tg = self._check_open()
        session = self.get(session_id)
        if directories is not None:
            directories = active_directories(cwd if cwd is not None else session.cwd, directories)
        request = ForkRequest(self._next_key(), cwd, directories, system_prompt)
        session.fifo.enqueue_fork(request)
        self._ensure_worker(tg, session)
        try:
            await request.done.wait()
        except BaseException:
            await self._forks.abandon(session, request)  # our caller left
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
            name = f"SessionBridge worker {session.session_id}"
            tg.start_soon(work, session, self._runner, self._forks.copy, name=name)

    def __repr__(self) -> str:
        return f"<SessionBridge {self._life.value} sessions={len(self._sessions)} limit={self._limit}>"
