"""One accepted prompt: the bridge's record of it (:class:`PromptJob`) and the caller's view (:class:`PromptHandle`).

A prompt is waiting, then running, then done. It settles exactly once — with its stop reason, its turn's failure,
or the reason the bridge cut it short — and settling ends its event stream, takes it out of its FIFO and releases
its slot.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import anyio

from ..domain import Message, Prompt, PromptEnded, StopReason
from ._exceptions import BridgeClosedError, PromptDeadlineExceededError, SessionClosedError
from ._stream import PromptStream

if TYPE_CHECKING:
    from ..tools import ToolClient

__all__ = ["Cause", "PromptHandle", "PromptJob"]


class Cause(enum.Enum):
    """Why the bridge cut a prompt short; decides the caller-visible outcome."""

    CANCELLED = "cancelled"  # -> stop reason "cancelled"
    DEADLINE = "deadline"  # -> PromptDeadlineExceededError
    SESSION_CLOSED = "session_closed"  # -> SessionClosedError
    BRIDGE_CLOSED = "bridge_closed"  # -> BridgeClosedError


class _State(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"


_Outcome: TypeAlias = "StopReason | Exception"


class PromptJob:
    """The bridge's side of one accepted prompt. Its transitions are driven by the bridge and its session's FIFO."""

    __slots__ = (
        "_cause",
        "_done",
        "_outcome",
        "_release",
        "_scope",
        "_sealed",
        "_sealed_stop",
        "_state",
        "client",
        "deadline",
        "deadline_ms",
        "handle",
        "key",
        "prompt",
        "prompt_id",
        "session_id",
        "stream",
    )

    def __init__(
        self,
        release: Callable[[PromptJob], None],
        session_id: str,
        prompt: Prompt,
        *,
        key: int,
        deadline_ms: int | None,
        deadline: float | None,
        stream: PromptStream,
        client: ToolClient | None = None,
    ) -> None:
        self.client = client  # the editor side of this prompt's tool calls (None: tools run locally, no one to ask)
        self.prompt_id: str = uuid.uuid4().hex
        self.session_id = session_id
        self.prompt = prompt
        self.key = key  # its place in the FIFO
        self.deadline_ms = deadline_ms  # effective: the shorter of the bridge default and the per-prompt one
        self.deadline = deadline  # anyio clock time, or None
        self.stream = stream
        self._release = release  # its FIFO's settle: called once, as it settles
        self._state = _State.WAITING
        self._scope: anyio.CancelScope | None = None
        self._cause: Cause | None = None  # first reason the bridge interrupted the running prompt
        self._outcome: _Outcome | None = None
        self._sealed = False  # the turn has decided what is stored (see seal)
        self._sealed_stop: StopReason | None = None  # ... and it was stored complete, with this stop reason
        self._done = anyio.Event()
        self.handle = PromptHandle(self)

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    async def wait(self) -> _Outcome:
        """Wait until settled; the outcome (a stop reason, or the failure)."""
        await self._done.wait()
        assert self._outcome is not None
        return self._outcome

    def interrupt(self, cause: Cause) -> None:
        """Waiting: settle now; running: cancel its scope (the first cause decides its outcome); done: no-op."""
        if self._state is _State.WAITING:
            self.settle(self._outcome_of(cause))
        elif self._state is _State.RUNNING and not self._sealed:  # once sealed, the outcome is decided
            assert self._scope is not None
            if self._cause is None:
                # First cause wins; a deadline that has already passed counts as first.
                self._cause = Cause.DEADLINE if self._deadline_passed(self._scope) else cause
            self._scope.cancel()

    def expire(self) -> None:
        """The deadline reaper's hook; a running prompt is stopped by its scope's own deadline instead."""
        if self._state is _State.WAITING:
            self.settle(self._outcome_of(Cause.DEADLINE))

    def start(self, scope: anyio.CancelScope) -> None:
        self._state = _State.RUNNING
        self._scope = scope

    def seal(self, answer: Message) -> Message:
        """The turn is about to store its answer: decide the prompt's outcome now, once, so reply and store agree.

        Cut short already (a cause, or its deadline passed): the cause decides the reply and the answer is stored
        ``cancelled`` whatever the turn made of it. Otherwise the turn's own outcome stands, and a cancel or deadline
        arriving while the answer is being stored changes neither. Returns the answer to store.
        """
        if self._state is not _State.RUNNING or self._sealed:
            return answer
        assert self._scope is not None
        self._sealed = True
        if self._cause is None and self._deadline_passed(self._scope):
            self._cause = Cause.DEADLINE
        if self._cause is not None:  # the cause answers: the answer is stored as what it is, cut short
            return dataclasses.replace(answer, stop_reason="cancelled", outcome="cancelled")
        if answer.outcome == "complete":
            self._sealed_stop = answer.stop_reason
        return answer

    def finish(self, scope: anyio.CancelScope, result: StopReason | None, error: Exception | None) -> None:
        """Settle after the runner returned: what :meth:`seal` decided, else the cause that cut the prompt short,
        else the runner's own result or failure."""
        outcome: _Outcome
        if self._cause is None and self._sealed_stop is not None:
            # Stored complete: a late cancel or deadline changes nothing (a failure to store it still fails it).
            outcome = error if error is not None else self._sealed_stop
        elif self._cause is not None or (scope.cancel_called and not self._sealed):
            outcome = self._outcome_of(self._cause or Cause.DEADLINE)
            if isinstance(outcome, BaseException) and error is not None:
                outcome.__cause__ = error
        elif error is not None:
            outcome = error
        elif result is None:  # a broken runner must not take the worker down
            outcome = TypeError("the turn runner returned None instead of a stop reason")
        else:
            outcome = result
        self.settle(outcome)

    def abort(self) -> None:
        """Settle a prompt whose run was torn down from outside (host shutdown): its cause, else bridge closed."""
        self.settle(self._outcome_of(self._cause or Cause.BRIDGE_CLOSED))

    def settle(self, outcome: _Outcome) -> None:
        """The one place a prompt ends: outcome recorded, stream ended, FIFO left, slot released; exactly once."""
        if self._state is _State.DONE:
            return
        self._state = _State.DONE
        self._outcome = outcome
        try:
            # The stream's reader wakes before whoever awaits the outcome: the prompt's own answer goes out before
            # the answer of the request that ended it (``session/close``, shutdown).
            if isinstance(outcome, Exception):
                self.stream.end(PromptEnded(error=outcome))
            else:
                self.stream.end(PromptEnded(stop_reason=outcome))
        finally:
            self._done.set()  # whatever happens, no awaiter can hang
            self._release(self)

    def _outcome_of(self, cause: Cause) -> _Outcome:
        if cause is Cause.CANCELLED:
            return "cancelled"
        if cause is Cause.DEADLINE:
            assert self.deadline_ms is not None
            return PromptDeadlineExceededError(self.session_id, self.deadline_ms)
        if cause is Cause.SESSION_CLOSED:
            return SessionClosedError(self.session_id)
        return BridgeClosedError()

    def _deadline_passed(self, scope: anyio.CancelScope) -> bool:
        # Only the deadline cancels our scope without recording a cause.
        return scope.cancel_called or (self.deadline is not None and anyio.current_time() >= self.deadline)

    def __repr__(self) -> str:
        return f"<PromptJob {self.prompt_id} session={self.session_id} {self._state.value}>"


class PromptHandle:
    """One accepted prompt, as its caller sees it: its events, its outcome, and a way to cancel it.

    Read :attr:`events` to the end (or ``close()`` it): the turn waits for its reader once the stream's buffer
    is full. Awaiting :meth:`result` does not own the prompt: if the awaiting task is cancelled the prompt goes
    on; call :meth:`cancel` to stop it.
    """

    __slots__ = ("_job",)

    def __init__(self, job: PromptJob) -> None:
        self._job = job

    @property
    def prompt_id(self) -> str:
        return self._job.prompt_id

    @property
    def session_id(self) -> str:
        return self._job.session_id

    @property
    def prompt(self) -> Prompt:
        return self._job.prompt

    @property
    def deadline_ms(self) -> int | None:
        """The effective deadline: the shorter of the bridge's and the prompt's own (None: none)."""
        return self._job.deadline_ms

    @property
    def done(self) -> bool:
        return self._job.done

    @property
    def events(self) -> PromptStream:
        """The prompt's events in order, ending with exactly one ``PromptEnded`` (one reader)."""
        return self._job.stream

    async def result(self) -> StopReason:
        """The stop reason (``"cancelled"`` after a cancel), or raise the failure that settled the prompt."""
        outcome = await self._job.wait()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def cancel(self) -> None:
        """Waiting: leave the FIFO now; running: cancel its scope. Settles ``"cancelled"``; no-op if done."""
        self._job.interrupt(Cause.CANCELLED)

    def __repr__(self) -> str:
        return f"<PromptHandle {self.prompt_id} session={self.session_id} done={self.done}>"
