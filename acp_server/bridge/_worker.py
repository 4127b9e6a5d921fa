"""A session's worker: runs the items of its FIFO strictly one at a time, in order, until the FIFO is empty.

Invariants: a prompt runs under its own cancel scope (its cancel, its deadline, a close) and is settled on every
exit; the next item starts only once the prompt's reader has taken its outcome or left, or the session closed (so a
prompt's events never overtake the one before on a wire they share); a cancellation from outside settles everything
still queued before it propagates, so nothing queued hangs.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.lowlevel

from ..domain import Emit, Prompt, StopReason
from ..tools import checkpoints_used
from ._prompt import Cause, PromptJob
from ._session import ForkRequest, SessionEntry, now

if TYPE_CHECKING:
    from ..tools import ToolClient

__all__ = ["ForkNow", "TurnRunner", "work"]


class TurnRunner(Protocol):
    """Runs one prompt against a session's conversation, sending its events in order; returns the stop reason.

    ``emit`` is the writing end of the prompt's event stream: awaiting it is the reader's backpressure. ``client``
    is the editor side of the prompt's tool calls (None: the prompt came from a face with no one to ask). The
    runner runs under the prompt's cancel scope and must let cancellation propagate (clean up, then re-raise).
    """

    async def __call__(
        self, session: SessionEntry, prompt: Prompt, emit: Emit, client: ToolClient | None, /
    ) -> StopReason: ...


ForkNow = Callable[[SessionEntry, ForkRequest], Awaitable[None]]
"""Copies a session for a fork that reached the head of its FIFO; always sets the request's ``done``."""


async def work(session: SessionEntry, runner: TurnRunner, fork_now: ForkNow) -> None:
    """Run the session's FIFO items one at a time, in order, until it is empty; absorb every outcome."""
    try:
        while (item := session.fifo.take()) is not None:
            if isinstance(item, ForkRequest):
                await fork_now(session, item)
            else:
                await _run(session, item, runner)
                await _released(session, item)
            await anyio.lowlevel.checkpoint()
    except BaseException:
        # Only cancellation from outside (the host's) gets here: nothing queued may hang.
        session.shutdown(Cause.BRIDGE_CLOSED)
        raise
    finally:
        session.fifo.release_worker()


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


async def _run(session: SessionEntry, job: PromptJob, runner: TurnRunner) -> None:
    """Run one prompt under its own cancel scope (cancel, deadline, close); settle it on every exit."""
    scope = anyio.CancelScope(deadline=job.deadline if job.deadline is not None else math.inf)
    result: StopReason | None = None
    error: Exception | None = None
    try:
        with scope:
            job.start(scope)
            with checkpoints_used(session.checkpoints):  # what its tools change is checkpointed (/rewind)
                result = await runner(session, job.prompt, job.stream.send, job.client)
    except Exception as exc:  # the runner's failure belongs to this prompt's caller
        error = exc
    except BaseException:  # cancelled from outside our scope (host shutdown), or KeyboardInterrupt & co
        job.abort()
        raise
    job.finish(scope, result, error)
    session.updated_at = now()
