"""The session bridge: sessions, a prompt FIFO per session, synchronous admission, slots, deadlines, fork.

Invariants:
- ``pending_prompt_count`` = prompts waiting in the session's FIFO + the one running; admission refuses
  when it has reached the limit; every accepted prompt releases its slot exactly once, as its handle settles.
- Per session, one worker runs FIFO items strictly one at a time, in order; sessions run concurrently.
- Every task belongs to the bridge's task group; nothing is started before ``__aenter__``.
- A *journaled* session (``open_session``, ``load_session``, ``resume_session``, forks of those) lives in the
  store: its in-memory conversation is a copy of the stored history, changed only after the store has committed
  (``SessionEntry.begin_turn`` / ``end_turn``), and caught up with what other processes stored at each turn start.
  ``create_session`` makes an unjournaled, memory-only session (tests, embedding).
"""

from __future__ import annotations

import enum
import heapq
import math
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Protocol, TypeAlias

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from ..domain import Conversation, Emit, Message, Prompt, StopReason
from ..errors import ServerError
from ..store import DEFAULT_PAGE_SIZE, MemorySessionStore, SessionPage, SessionStore, StoredMessage, TurnTicket
from ._exceptions import (
    BridgeClosedError,
    PromptCancelledError,
    PromptDeadlineExceededError,
    PromptQueueFullError,
    SessionAlreadyExistsError,
    SessionClosedError,
    SessionNotFoundError,
)
from ._limits import validate_deadline_ms, validate_max_pending
from ._signal import CancelSignal

__all__ = ["PromptHandle", "SessionBridge", "SessionEntry", "TurnRunner"]


class TurnRunner(Protocol):
    """Runs one prompt against a session's conversation, emitting events in order; returns the stop reason.

    It runs under the prompt's cancel scope and must let cancellation propagate (clean up, then re-raise).
    """

    async def __call__(self, session: SessionEntry, prompt: Prompt, emit: Emit, /) -> StopReason: ...


class _State(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"


class _Cause(enum.Enum):
    """Why the bridge cut a prompt short; decides the caller-visible outcome."""

    CANCELLED = "cancelled"  # -> stop reason "cancelled"
    DEADLINE = "deadline"  # -> PromptDeadlineExceededError
    SESSION_CLOSED = "session_closed"  # -> SessionClosedError
    BRIDGE_CLOSED = "bridge_closed"  # -> BridgeClosedError


_Outcome: TypeAlias = "StopReason | BaseException"


def _now() -> datetime:
    return datetime.now(UTC)


class PromptHandle:
    """One accepted prompt: settles exactly once (result, error, cancel, deadline, close), then frees a slot.

    Awaiting :meth:`result` does not own the prompt: if the awaiting task is cancelled the prompt goes on;
    call :meth:`cancel` to stop it.
    """

    def __init__(
        self,
        session: SessionEntry,
        prompt: Prompt,
        emit: Emit,
        *,
        fifo_key: int,
        deadline_ms: int | None,
        deadline: float | None,
    ) -> None:
        self.prompt_id: str = uuid.uuid4().hex
        self.prompt = prompt
        self.deadline_ms = deadline_ms  # effective: the shorter of the bridge default and the per-prompt one
        self._session = session
        self._emit = emit
        self._fifo_key = fifo_key
        self._deadline = deadline  # anyio clock time, or None
        self._state = _State.WAITING
        self._scope: anyio.CancelScope | None = None
        self._cause: _Cause | None = None  # first reason the bridge interrupted a running prompt
        self._outcome: _Outcome | None = None
        self._done = anyio.Event()
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def session_id(self) -> str:
        return self._session.session_id

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    async def result(self) -> StopReason:
        """The stop reason (``"cancelled"`` after a cancel), or raise the failure that settled the prompt."""
        await self._done.wait()
        outcome = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None
        return outcome

    def cancel(self) -> None:
        """Waiting: leave the FIFO now; running: cancel its scope. Settles ``"cancelled"``; no-op if done."""
        self._interrupt(_Cause.CANCELLED)

    # -- internals (driven by the bridge) --------------------------------------------------------------------

    def _outcome_of(self, cause: _Cause) -> _Outcome:
        if cause is _Cause.CANCELLED:
            return "cancelled"
        if cause is _Cause.DEADLINE:
            assert self.deadline_ms is not None
            return PromptDeadlineExceededError(self.session_id, self.deadline_ms)
        if cause is _Cause.SESSION_CLOSED:
            return SessionClosedError(self.session_id)
        return BridgeClosedError()

    def _interrupt(self, cause: _Cause) -> None:
        if self._state is _State.WAITING:
            self._settle(self._outcome_of(cause))
        elif self._state is _State.RUNNING:
            assert self._scope is not None
            if self._cause is None:
                # First cause wins; a deadline that has already passed counts as first.
                self._cause = _Cause.DEADLINE if self._deadline_passed(self._scope) else cause
            self._scope.cancel()

    def _deadline_passed(self, scope: anyio.CancelScope) -> bool:
        # Only the deadline cancels our scope without recording a cause.
        return scope.cancel_called or (self._deadline is not None and anyio.current_time() >= self._deadline)

    def _expire(self) -> None:
        """The deadline reaper's hook; a running prompt is stopped by its scope's own deadline instead."""
        if self._state is _State.WAITING:
            self._settle(self._outcome_of(_Cause.DEADLINE))

    def _start(self, scope: anyio.CancelScope) -> None:
        self._state = _State.RUNNING
        self._scope = scope
        self._session._running = self

    def _finish(self, scope: anyio.CancelScope, result: StopReason | None, error: Exception | None) -> None:
        """Settle after the runner returned; if the bridge cut the prompt short, that cause decides."""
        outcome: _Outcome
        if self._cause is not None or scope.cancel_called:
            outcome = self._outcome_of(self._cause or _Cause.DEADLINE)
            if isinstance(outcome, BaseException) and error is not None:
                outcome.__cause__ = error
        elif error is not None:
            outcome = error
        elif result is None:  # a broken runner must not take the worker down
            outcome = TypeError("the turn runner returned None instead of a stop reason")
        else:
            outcome = result
        self._settle(outcome)

    def _settle(self, outcome: _Outcome) -> None:
        """The one place a prompt ends: record the outcome, leave the FIFO, release the slot; exactly once."""
        if self._state is _State.DONE:
            return
        self._state = _State.DONE
        self._outcome = outcome
        self._done.set()  # first: whatever happens below, no awaiter can hang
        session = self._session
        session._fifo.pop(self._fifo_key, None)
        if session._running is self:
            session._running = None
        session._release_slot()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def __repr__(self) -> str:
        return f"<PromptHandle {self.prompt_id} session={self.session_id} {self._state.value}>"


class _ForkRequest:
    """A fork waiting in the FIFO: serialized like a prompt, but never counted and never refused."""

    __slots__ = ("abandoned", "child", "cwd", "done", "error")

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.child: SessionEntry | None = None
        self.error: ServerError | None = None
        self.done = anyio.Event()
        self.abandoned = False  # the caller left while the copy was being stored


_FifoItem: TypeAlias = "PromptHandle | _ForkRequest"


class SessionEntry:
    """One session: cwd, conversation, FIFO. ``pending_prompt_count`` = waiting prompts + the running one.

    With a ``journal`` (the store), ``conversation.messages[:synced]`` equal the stored messages ``1..synced``;
    the turn that holds the FIFO is the only writer, through :meth:`begin_turn` and :meth:`end_turn`.
    """

    def __init__(
        self,
        session_id: str,
        cwd: str,
        conversation: Conversation,
        title: str = "",
        *,
        journal: SessionStore | None = None,
        synced: int = 0,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.conversation = conversation
        self.title = title
        self.created_at = self.updated_at = _now()
        self.closed = False
        self._journal = journal
        self._synced = synced
        self._ticket: TurnTicket | None = None
        self._fifo: OrderedDict[int, _FifoItem] = OrderedDict()
        self._pending = 0
        self._running: PromptHandle | None = None
        self._worker_active = False

    @property
    def journaled(self) -> bool:
        """Whether this session's history is written to the store."""
        return self._journal is not None

    async def begin_turn(self, prompt: Prompt, user: Message) -> Conversation:
        """Record the prompt (store first, then memory); return the history the model gets before it.

        The store call is shielded: once its transaction commits, the caller always gets the ticket, so the
        turn's answer is always ended (a cancellation surfaces at the caller's next checkpoint).
        """
        messages = self.conversation.messages
        if self._journal is None:
            history = Conversation(list(messages))
            messages.append(user)
            return history
        with anyio.CancelScope(shield=True):
            ticket = await self._journal.begin_turn(
                self.session_id, known=self._synced, content=user.content, parts=prompt.parts, title=prompt.title
            )
        del messages[ticket.since :]
        messages.extend(message.to_message() for message in ticket.catch_up)
        history = Conversation(list(messages))
        messages.append(user)
        self._synced = ticket.user_seq
        self._ticket = ticket
        return history

    async def end_turn(self, answer: Message) -> None:
        """Record the answer of the turn begun last (store first, then memory); call once per ``begin_turn``."""
        if self._journal is None:
            self.conversation.messages.append(answer)
            return
        ticket, self._ticket = self._ticket, None
        if ticket is None:
            raise RuntimeError("end_turn() without begin_turn()")
        outcome = answer.outcome
        if outcome != "complete" and outcome != "cancelled" and outcome != "failed":
            raise ValueError(f"a turn ends complete, cancelled or failed, not {outcome!r}")
        await self._journal.end_turn(
            ticket,
            content=answer.content,
            reasoning=answer.reasoning,
            stop_reason=answer.stop_reason,
            outcome=outcome,
        )
        self.conversation.messages.append(answer)
        self._synced = ticket.answer_seq

    @property
    def pending_prompt_count(self) -> int:
        return self._pending

    @property
    def running(self) -> PromptHandle | None:
        return self._running

    def _release_slot(self) -> None:
        assert self._pending > 0, "a prompt slot was released twice"
        self._pending -= 1
        self.updated_at = _now()

    def _shutdown(self, cause: _Cause) -> PromptHandle | None:
        """Settle everything waiting, interrupt the running prompt (returned, to be awaited)."""
        self.closed = True
        items = list(self._fifo.values())
        self._fifo.clear()
        for item in items:
            if isinstance(item, PromptHandle):
                item._interrupt(cause)
            else:
                closed = cause is _Cause.SESSION_CLOSED
                item.error = SessionClosedError(self.session_id) if closed else BridgeClosedError()
                item.done.set()
        running = self._running
        if running is not None:
            running._interrupt(cause)
        return running

    def __repr__(self) -> str:
        return f"<SessionEntry {self.session_id} pending={self._pending} cwd={self.cwd!r}>"


class _Life(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class SessionBridge:
    """Sessions and their prompt FIFOs; the admission authority (Q3). Lifecycle: unopened → open → closed.

    ``send_prompt`` is synchronous so admission errors raise before any transport answers "accepted" (Q4).
    """

    def __init__(
        self,
        runner: TurnRunner,
        *,
        store: SessionStore | None = None,
        max_pending_prompts_per_session: int | float | None = 5,
        prompt_deadline_ms: int | None = None,
    ) -> None:
        """``store``: where journaled sessions live, opened and closed by the caller; None = a private
        in-memory store the bridge opens and closes itself."""
        self._runner = runner
        self._own_store = store is None
        self._store: SessionStore = MemorySessionStore() if store is None else store
        self._limit = validate_max_pending(max_pending_prompts_per_session)
        self._deadline_ms = validate_deadline_ms(prompt_deadline_ms)
        self._life = _Life.UNOPENED
        self._tg: TaskGroup | None = None
        self._sessions: dict[str, SessionEntry] = {}
        self._keys = 0  # FIFO keys and deadline tie-breakers, increasing
        # A heap of (deadline, key, handle); settled handles are skipped when they come up.
        self._deadlines: list[tuple[float, int, PromptHandle]] = []
        self._deadline_wakeup: anyio.Event | None = None
        self._reaper_scope: anyio.CancelScope | None = None
        self._closing: list[PromptHandle] = []  # running prompts interrupted by close, awaited by aclose()

    # -- settings --------------------------------------------------------------------------------------------

    @property
    def limit(self) -> int | None:
        """Max pending prompts per session; ``None`` = unlimited."""
        return self._limit

    @property
    def prompt_deadline_ms(self) -> int | None:
        """The default deadline of every accepted prompt; ``None`` = none."""
        return self._deadline_ms

    @property
    def sessions(self) -> tuple[SessionEntry, ...]:
        """The open sessions, oldest first."""
        return tuple(self._sessions.values())

    @property
    def store(self) -> SessionStore:
        return self._store

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> SessionBridge:
        if self._life is _Life.OPEN:
            raise RuntimeError("SessionBridge is already open")
        if self._life is _Life.CLOSED:
            raise RuntimeError("SessionBridge cannot be reopened once closed; create a new one")
        if self._own_store:
            await self._store.open()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._life = _Life.OPEN
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
        assert self._tg is not None
        try:
            if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
                await self._tg.__aexit__(None, None, None)
                return None
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            if self._own_store:
                await self._store.aclose()

    async def aclose(self) -> None:
        """Close every session (prompts settle with ``BridgeClosedError``); wait for running ones to unwind.

        Idempotent; safe to call inside ``async with`` (the task group itself is left by ``__aexit__``).
        """
        self._begin_close()
        for handle in self._closing:
            await handle._done.wait()

    def _begin_close(self) -> None:
        if self._life is _Life.CLOSED:
            return
        was_open = self._life is _Life.OPEN
        self._life = _Life.CLOSED
        if not was_open:
            return
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            running = session._shutdown(_Cause.BRIDGE_CLOSED)
            if running is not None:
                self._closing.append(running)
        if self._reaper_scope is not None:
            self._reaper_scope.cancel()

    def _check_open(self) -> TaskGroup:
        if self._life is _Life.CLOSED:
            raise BridgeClosedError()
        if self._life is _Life.UNOPENED or self._tg is None:
            raise RuntimeError("SessionBridge is not open; use 'async with SessionBridge(...)'")
        return self._tg

    # -- sessions --------------------------------------------------------------------------------------------

    def create_session(
        self, cwd: str, *, session_id: str | None = None, conversation: Conversation | None = None
    ) -> SessionEntry:
        """A new memory-only session (never written to the store) with an empty (or given) conversation;
        ``session_id`` defaults to a uuid4 hex. ACP ``session/new`` uses :meth:`open_session`."""
        self._check_open()
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
    ) -> SessionEntry:
        session_id = session_id if session_id is not None else uuid.uuid4().hex
        if session_id in self._sessions:
            raise SessionAlreadyExistsError(session_id)
        entry = SessionEntry(session_id, cwd, conversation, title, journal=journal, synced=synced)
        self._sessions[session_id] = entry
        return entry

    async def open_session(self, cwd: str) -> SessionEntry:
        """A new journaled session: its row is committed to the store before it exists here."""
        self._check_open()
        session_id = uuid.uuid4().hex
        record = await self._store.create_session(session_id, cwd)
        self._check_open()
        entry = self._add_session(cwd, session_id, Conversation(), journal=self._store)
        entry.created_at = entry.updated_at = record.created_at
        return entry

    async def resume_session(self, session_id: str, *, cwd: str | None = None) -> SessionEntry:
        """Attach a stored session (no-op if attached); its conversation is read from the store.

        ``cwd`` (the client's working directory now) is the attached session's cwd; the stored one is kept.
        """
        self._check_open()
        entry = self._sessions.get(session_id)
        if entry is not None:
            return entry
        entry, _ = await self.load_session(session_id, cwd=cwd)
        return entry

    async def load_session(
        self, session_id: str, *, cwd: str | None = None
    ) -> tuple[SessionEntry, tuple[StoredMessage, ...]]:
        """Attach a stored session (if not attached) and return its whole committed history, oldest first."""
        self._check_open()
        snapshot = await self._store.read_session(session_id)
        self._check_open()
        if snapshot is None:
            raise SessionNotFoundError(session_id)
        entry = self._sessions.get(session_id)
        if entry is None:
            messages = snapshot.messages
            synced = next((i for i, message in enumerate(messages) if not message.final), len(messages))
            record = snapshot.record
            entry = self._add_session(
                cwd if cwd is not None else record.cwd,
                session_id,
                Conversation([message.to_message() for message in messages[:synced]]),
                record.title,
                journal=self._store,
                synced=synced,
            )
            entry.created_at, entry.updated_at = record.created_at, record.updated_at
        return entry, snapshot.messages

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> SessionPage:
        """Stored sessions (attached or not), most recently updated first; see ``SessionStore.list_sessions``."""
        self._check_open()
        return await self._store.list_sessions(cwd=cwd, cursor=cursor, limit=limit)

    def get(self, session_id: str) -> SessionEntry:
        self._check_open()
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFoundError(session_id) from None

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
        running = session._shutdown(_Cause.SESSION_CLOSED)
        if running is not None:
            await running._done.wait()

    # -- prompts ---------------------------------------------------------------------------------------------

    def send_prompt(
        self,
        session_id: str,
        prompt: Prompt,
        *,
        emit: Emit,
        cancel: CancelSignal | None = None,
        deadline_ms: int | None = None,
    ) -> PromptHandle:
        """Admit a prompt or raise, synchronously (Q4): lookup, pre-cancelled, limit, then count and enqueue.

        ``deadline_ms`` can only shorten the bridge's default; the deadline runs from acceptance.
        """
        per_prompt_ms = validate_deadline_ms(deadline_ms, "deadline_ms")
        tg = self._check_open()
        session = self.get(session_id)  # (1)
        if cancel is not None and cancel.is_set():  # (2) before counting
            raise PromptCancelledError(session_id)
        if self._limit is not None and session._pending >= self._limit:  # (3)
            raise PromptQueueFullError(session_id, self._limit, session._pending)

        effective_ms = min((ms for ms in (self._deadline_ms, per_prompt_ms) if ms is not None), default=None)
        deadline = anyio.current_time() + effective_ms / 1000 if effective_ms is not None else None
        key = self._next_key()
        handle = PromptHandle(
            session, prompt, emit, fifo_key=key, deadline_ms=effective_ms, deadline=deadline
        )
        session._pending += 1  # (4) count, then enqueue; (5) is PromptHandle._settle
        session._fifo[key] = handle
        session.updated_at = _now()
        if not session.title:
            session.title = prompt.title
        if deadline is not None:
            self._watch_deadline(deadline, key, handle)
        if cancel is not None:
            handle._unsubscribe = cancel.on_set(handle.cancel)
        self._ensure_worker(tg, session)
        return handle

    def cancel_running(self, session_id: str) -> bool:
        """Cancel the running prompt (ACP ``session/cancel``); waiting ones stay. True if one was running."""
        running = self.get(session_id)._running
        if running is None:
            return False
        running.cancel()
        return True

    async def fork(self, session_id: str, *, cwd: str | None = None) -> SessionEntry:
        """A new session with a copy of the conversation, taken after every item queued before it (Q6).

        Serialized behind the FIFO, never counted, never refused.
        """
        tg = self._check_open()
        session = self.get(session_id)
        request = _ForkRequest(cwd)
        key = self._next_key()
        session._fifo[key] = request
        self._ensure_worker(tg, session)
        try:
            await request.done.wait()
        except BaseException:
            session._fifo.pop(key, None)  # our caller left: don't fork for nobody
            request.abandoned = True
            if request.child is not None and self._sessions.get(request.child.session_id) is request.child:
                del self._sessions[request.child.session_id]
                request.child.closed = True
            raise
        if request.error is not None:
            raise request.error
        assert request.child is not None
        return request.child

    # -- workers ---------------------------------------------------------------------------------------------

    def _next_key(self) -> int:
        self._keys += 1
        return self._keys

    def _ensure_worker(self, tg: TaskGroup, session: SessionEntry) -> None:
        if not session._worker_active:
            session._worker_active = True
            tg.start_soon(self._work, session, name=f"SessionBridge worker {session.session_id}")

    async def _work(self, session: SessionEntry) -> None:
        """Run the session's FIFO items one at a time, in order, until it is empty; absorb every outcome."""
        try:
            while session._fifo:
                _, item = session._fifo.popitem(last=False)
                if isinstance(item, _ForkRequest):
                    await self._fork_now(session, item)
                else:
                    await self._run(session, item)
                await anyio.lowlevel.checkpoint()
        except BaseException:
            # Only cancellation from outside (the host's) gets here: nothing queued may hang.
            session._shutdown(_Cause.BRIDGE_CLOSED)
            raise
        finally:
            session._worker_active = False

    async def _fork_now(self, session: SessionEntry, item: _ForkRequest) -> None:
        """Copy the session (in the store first when journaled); always sets ``item.done``."""
        try:
            cwd = item.cwd if item.cwd is not None else session.cwd
            child_id = uuid.uuid4().hex
            if session._journal is not None:
                try:
                    await session._journal.fork_session(session.session_id, child_id, cwd=cwd)
                except ServerError as exc:
                    item.error = exc
                    return
            if self._life is not _Life.OPEN or item.abandoned:
                item.error = BridgeClosedError()
            elif session.closed:
                item.error = SessionClosedError(session.session_id)
            else:
                item.child = self._add_session(
                    cwd,
                    child_id,
                    session.conversation.fork(),
                    session.title,
                    journal=session._journal,
                    synced=session._synced,
                )
        finally:
            if item.child is None and item.error is None:
                item.error = BridgeClosedError()
            item.done.set()

    async def _run(self, session: SessionEntry, handle: PromptHandle) -> None:
        """Run one prompt under its own cancel scope (cancel, deadline, close); settle it on every exit."""
        scope = anyio.CancelScope(deadline=handle._deadline if handle._deadline is not None else math.inf)
        result: StopReason | None = None
        error: Exception | None = None
        try:
            with scope:
                handle._start(scope)
                result = await self._runner(session, handle.prompt, handle._emit)
        except Exception as exc:  # the runner's failure belongs to this prompt's caller (Q5)
            error = exc
        except BaseException:  # cancelled from outside our scope (host shutdown), or KeyboardInterrupt & co
            handle._settle(handle._outcome_of(handle._cause or _Cause.BRIDGE_CLOSED))
            raise
        handle._finish(scope, result, error)

    async def _reap_deadlines(self, scope: anyio.CancelScope) -> None:
        """Expire waiting prompts at their deadline (running ones are stopped by their own scope)."""
        with scope:
            while True:
                now = anyio.current_time()
                while self._deadlines and self._deadlines[0][0] <= now:
                    _, _, handle = heapq.heappop(self._deadlines)
                    handle._expire()
                self._deadline_wakeup = wakeup = anyio.Event()
                next_deadline = self._deadlines[0][0] if self._deadlines else math.inf
                with anyio.CancelScope(deadline=next_deadline):
                    await wakeup.wait()

    def _watch_deadline(self, deadline: float, key: int, handle: PromptHandle) -> None:
        heapq.heappush(self._deadlines, (deadline, key, handle))
        if self._deadlines[0][1] == key and self._deadline_wakeup is not None:
            self._deadline_wakeup.set()

    def __repr__(self) -> str:
        return f"<SessionBridge {self._life.value} sessions={len(self._sessions)} limit={self._limit}>"
