"""``DaemonSessionClient``: one session, one long-lived event subscription, the same local prompt limit (Q14).

Lifecycle: unopened → open → closed. A constructor (``create_or_attach``, ``load``, ``resume``) does the HTTP work
and returns it unopened; ``async with`` opens the subscription (the daemon has subscribed it when ``__aenter__``
returns, so no event of a later prompt is missed) and closes it on exit. ``aclose()`` is idempotent; a closed
session client raises :class:`DaemonClientClosedError`. It borrows its :class:`DaemonClient` (never closes it) and
shares its reservations: a session's prompts count once, whichever of the two sent them.

One task reads the subscription, owned by the session client's task group. It dispatches each event, in order,
to the prompts being followed; a prompt's slot is released by the reader the moment it reads the prompt's
terminal event, and by the prompt's caller on every other way out.
"""

from __future__ import annotations

import enum
import logging
import os
from collections import deque
from types import TracebackType
from typing import Self

import anyio
from anyio.abc import TaskStatus
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..tasks import Lifecycle, OwnedTaskGroup
from ._client import DaemonClient
from ._events import DaemonEvent, PermissionRequestEvent, SessionUpdateEvent
from ._exceptions import DaemonClientClosedError, DaemonClientError, DaemonEventStreamEndedError
from ._limits import PromptSlot, validate_limit
from ._models import PromptInput, PromptResult, SessionConfig
from ._prompting import Accepted, prompt_body, run_turn
from ._stream import EventStream
from ._turn import OnPermission, OnUpdate, TurnItem, TurnTracker

__all__ = ["INHERIT", "DaemonSessionClient", "Inherit"]

logger = logging.getLogger("acp_server.client")

_UPDATE_BUFFER = 64  # items a followed prompt may lag behind the reader before the reader waits for it


class Inherit(enum.Enum):
    """The type of :data:`INHERIT`."""

    INHERIT = "inherit"


INHERIT = Inherit.INHERIT
"""``max_pending_prompts_per_session`` default of a session client: use its :class:`DaemonClient`'s limit."""


class _Watch:
    """A prompt being followed: items read before it was registered (``early``), then live ones."""

    def __init__(self, tracker: TurnTracker, slot: PromptSlot) -> None:
        self.tracker = tracker
        self.slot = slot
        self.early: deque[TurnItem] = deque()
        self.failure: BaseException | None = None
        self.send: MemoryObjectSendStream[TurnItem]
        self.receive: MemoryObjectReceiveStream[TurnItem]
        self.send, self.receive = anyio.create_memory_object_stream[TurnItem](_UPDATE_BUFFER)

    def fail(self, failure: BaseException) -> None:
        """The subscription ended: give the slot back and end the items (the caller raises ``failure``)."""
        self.slot.release()
        if self.failure is None:
            self.failure = failure
        self.send.close()

    async def next_item(self) -> TurnItem | None:
        if self.early:
            return self.early.popleft()
        try:
            return await self.receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            if self.failure is not None:
                raise self.failure from None
            return None

    def close(self) -> None:
        self.send.close()
        self.receive.close()


class DaemonSessionClient:
    """One daemon session. Build it with :meth:`create_or_attach`, :meth:`load` or :meth:`resume` (or directly for
    an existing session id), then ``async with`` it.

    ``max_pending_prompts_per_session`` (direct construction and constructors): :data:`INHERIT` (the client's),
    or a value with the same rules as :class:`DaemonClient`'s (``None`` / ``0`` / ``math.inf`` disable it).
    """

    def __init__(
        self,
        client: DaemonClient,
        session_id: str,
        *,
        max_pending_prompts_per_session: int | float | Inherit | None = INHERIT,
    ) -> None:
        client._session_path(session_id)  # validates the id
        self._client = client
        self.session_id = session_id
        self._limit: int | Inherit | None = (
            INHERIT if max_pending_prompts_per_session is INHERIT else validate_limit(max_pending_prompts_per_session)
        )
        self._life = Lifecycle.UNOPENED
        self._tasks = OwnedTaskGroup()  # holds the one reader while open
        self._reader_scope: anyio.CancelScope | None = None
        self._stream: EventStream | None = None
        self._watches: dict[str, _Watch] = {}
        self._posting = 0  # prompt requests in flight: while any is, events are kept for them in the backlog
        self._backlog: list[DaemonEvent] = []
        self._ended: BaseException | None = None  # why the subscription ended

    # -- constructors (parameter positions are stable) ---------------------------------------------------------

    @classmethod
    async def create_or_attach(
        cls,
        client: DaemonClient,
        cwd: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        max_pending_prompts_per_session: int | float | Inherit | None = INHERIT,
        mode_id: str | None = None,
    ) -> Self:
        """Attach to ``session_id`` when given (nothing is sent until it opens), else create a session in ``cwd``
        in ``mode_id`` (None: the daemon's default; attaching takes none: use :meth:`set_mode`)."""
        if max_pending_prompts_per_session is not INHERIT:
            validate_limit(max_pending_prompts_per_session)  # before a session is created for nothing
        if session_id is not None and mode_id is not None:
            raise ValueError("mode_id applies to a session being created; attach, then set_mode()")
        if session_id is None:
            session_id = await client.create_session(cwd, mode_id=mode_id)
        return cls(client, session_id, max_pending_prompts_per_session=max_pending_prompts_per_session)

    @classmethod
    async def load(
        cls,
        client: DaemonClient,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        max_pending_prompts_per_session: int | float | Inherit | None = INHERIT,
    ) -> Self:
        """Load a stored session (:meth:`DaemonClient.load_session`; ``DaemonFeatureUnavailableError`` when the
        daemon does not serve it)."""
        if max_pending_prompts_per_session is not INHERIT:
            validate_limit(max_pending_prompts_per_session)
        session_id = await client.load_session(session_id, cwd)
        return cls(client, session_id, max_pending_prompts_per_session=max_pending_prompts_per_session)

    @classmethod
    async def resume(
        cls,
        client: DaemonClient,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        max_pending_prompts_per_session: int | float | Inherit | None = INHERIT,
    ) -> Self:
        """Resume a stored session without replay (:meth:`DaemonClient.resume_session`)."""
        if max_pending_prompts_per_session is not INHERIT:
            validate_limit(max_pending_prompts_per_session)
        session_id = await client.resume_session(session_id, cwd)
        return cls(client, session_id, max_pending_prompts_per_session=max_pending_prompts_per_session)

    # -- state -------------------------------------------------------------------------------------------------

    @property
    def client(self) -> DaemonClient:
        return self._client

    @property
    def limit(self) -> int | None:
        """The local limit of this session's prompts (the client's unless overridden); None = disabled."""
        return self._client.limit if self._limit is INHERIT else self._limit

    @property
    def pending_prompts(self) -> int:
        """Prompts of this session in flight through this client (or its :class:`DaemonClient`)."""
        return self._client.pending_prompts(self.session_id)

    @property
    def last_event_id(self) -> int | None:
        """The id of the last event the subscription read."""
        return None if self._stream is None else self._stream.last_event_id

    @property
    def closed(self) -> bool:
        return self._life is Lifecycle.CLOSED

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._life is Lifecycle.CLOSED:
            raise DaemonClientClosedError(f'The session client of "{self.session_id}" is closed')
        if self._life is Lifecycle.OPEN:
            raise RuntimeError("a DaemonSessionClient can be opened only once")
        tg = await self._tasks.enter()
        try:
            await tg.start(self._read, name=f"daemon session {self.session_id} events")
        except BaseException:
            tg.cancel_scope.cancel()
            await self._tasks.exit()  # the reader failed before it started: its error propagates
            self._life = Lifecycle.CLOSED
            raise
        self._life = Lifecycle.OPEN
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Close (the reader is cancelled), then leave the task group; the body's error propagates as is."""
        await self.aclose()
        return await self._tasks.exit(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Stop the subscription; prompts still followed end with :class:`DaemonClientClosedError` (their slots
        are released). The session stays on the daemon (see :meth:`close_session`). Idempotent."""
        if self._life is Lifecycle.CLOSED:
            return
        self._life = Lifecycle.CLOSED
        self._end(DaemonClientClosedError(f'The session client of "{self.session_id}" was closed'))
        if self._reader_scope is not None:
            self._reader_scope.cancel()
        await checkpoint()

    def _check_open(self) -> None:
        if self._life is Lifecycle.CLOSED:
            raise DaemonClientClosedError(f'The session client of "{self.session_id}" is closed')
        if self._life is Lifecycle.UNOPENED:
            raise RuntimeError("the DaemonSessionClient is not open; use 'async with'")

    # -- the subscription --------------------------------------------------------------------------------------

    async def _read(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The one reader: connect (then report started), dispatch every event, end every watch when it stops."""
        with anyio.CancelScope() as scope:
            self._reader_scope = scope
            stream = self._stream = self._client.events(self.session_id)
            try:
                await stream.connect()
                task_status.started()
                failure: BaseException
                try:
                    async for event in stream:
                        await self._dispatch(event)
                    failure = DaemonEventStreamEndedError(
                        f'Session "{self.session_id}" was closed',
                        session_id=self.session_id,
                        last_event_id=stream.last_event_id,
                        url=stream.url,
                    )
                except Exception as exc:  # never into the task group (it wraps the owner's block): to the prompts
                    if not isinstance(exc, DaemonClientError):
                        logger.error("event reader of session %s failed", self.session_id, exc_info=exc)
                    failure = exc
                self._end(failure)
            finally:
                await stream.aclose()

    def _end(self, failure: BaseException) -> None:
        if self._ended is None:
            self._ended = failure
        watches, self._watches = self._watches, {}
        for watch in watches.values():
            watch.fail(failure)

    async def _dispatch(self, event: DaemonEvent) -> None:
        if self._posting:
            self._backlog.append(event)
        for prompt_id, watch in list(self._watches.items()):
            item = watch.tracker.feed(event)
            if item is None:
                continue
            terminal = not isinstance(item, SessionUpdateEvent | PermissionRequestEvent)
            if terminal:
                watch.slot.release()  # its outcome is known now
                self._watches.pop(prompt_id, None)
            try:
                await watch.send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._watches.pop(prompt_id, None)  # its caller left
            if terminal:
                watch.send.close()

    # -- prompts -----------------------------------------------------------------------------------------------

    async def prompt(
        self,
        prompt: PromptInput,
        *,
        deadline_ms: int | None = None,
        on_update: OnUpdate | None = None,
        on_permission: OnPermission | None = None,
    ) -> PromptResult:
        """Like :meth:`DaemonClient.prompt` (same local limit, same errors, same release rules), followed on this
        session's subscription. ``on_update`` gets its ``session_update`` and ``tool_call`` events;
        ``on_permission`` answers its permission requests (an option id) — without it, **every permission request is
        rejected**. Neither may wait for another prompt of this session."""
        body = prompt_body(prompt, deadline_ms)
        self._check_open()
        if self._ended is not None:
            raise DaemonEventStreamEndedError(
                f'The event subscription of session "{self.session_id}" has ended: {self._ended}',
                session_id=self.session_id,
                last_event_id=self.last_event_id,
            ) from self._ended
        with self._client._reserve(self.session_id, self.limit) as slot:
            self._posting += 1
            try:
                outcome = await self._client._submit(self.session_id, body, wait=False)
                if isinstance(outcome, PromptResult):
                    return outcome
                watch = self._follow(outcome, slot)
            finally:
                self._posting -= 1
                if not self._posting:
                    self._backlog.clear()
            try:
                return await run_turn(self._client, watch.tracker, slot, watch.next_item, on_update, on_permission)
            finally:
                self._watches.pop(watch.tracker.prompt_id, None)
                watch.close()

    def _follow(self, accepted: Accepted, slot: PromptSlot) -> _Watch:
        """Synchronously: what the reader already dispatched about it, then register it for the rest."""
        watch = _Watch(TurnTracker(self.session_id, accepted.prompt_id, accepted.event_id), slot)
        for event in self._backlog:
            item = watch.tracker.feed(event)
            if item is not None:
                watch.early.append(item)
        if watch.tracker.done:
            watch.send.close()
        elif self._ended is not None or self._life is not Lifecycle.OPEN:
            watch.fail(self._ended or DaemonClientClosedError(f'The session client of "{self.session_id}" is closed'))
        else:
            self._watches[accepted.prompt_id] = watch
        return watch

    async def set_mode(self, mode_id: str) -> str:
        """Switch the session's mode (:meth:`DaemonClient.set_mode`); the mode now."""
        self._check_open()
        return await self._client.set_mode(self.session_id, mode_id)

    async def set_config_option(self, config_id: str, value: str) -> SessionConfig:
        """Set one of the session's config options, ``mode`` or ``model`` (:meth:`DaemonClient.set_config_option`)."""
        self._check_open()
        return await self._client.set_config_option(self.session_id, config_id, value)

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        """Answer one of the session's permission requests (:meth:`DaemonClient.answer_permission`)."""
        self._check_open()
        await self._client.answer_permission(self.session_id, request_id, option_id)

    async def cancel(self) -> None:
        """Stop the session's running prompt (:meth:`DaemonClient.cancel`)."""
        self._check_open()
        await self._client.cancel(self.session_id)

    async def close_session(self) -> None:
        """Delete the session on the daemon, then close this session client."""
        self._check_open()
        try:
            await self._client.close_session(self.session_id)
        finally:
            await self.aclose()

    def __repr__(self) -> str:
        return f"<DaemonSessionClient {self.session_id} {self._life.value} limit={self.limit}>"
