"""The tool calls of one model answer, run in order — except consecutive ``task`` calls, run side by side.

Invariants: records reach ``done`` in the order the model made the calls, also when the prompt is cancelled mid-batch
(then every started call's record, before the cancellation goes on); at most ``limit`` children run at once; any
other call runs alone, after the calls before it ended; ``after`` runs (shielded) once a call or a batch has ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

import anyio

from ..domain import ToolCallRecord

__all__ = ["CONCURRENT_TOOLS", "run_in_batches"]

CONCURRENT_TOOLS = frozenset({"task"})
"""Tools whose consecutive calls in one answer run concurrently (each works in its own child session)."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


C = TypeVar("C", bound=_Named)
RunOne = Callable[[C, Callable[[ToolCallRecord], None]], Awaitable[None]]


def _batches(calls: Sequence[C]) -> list[list[C]]:
    out: list[list[C]] = []
    for call in calls:
        if out and call.name in CONCURRENT_TOOLS and out[-1][-1].name in CONCURRENT_TOOLS:
            out[-1].append(call)
        else:
            out.append([call])
    return out


async def _one(
    run_one: RunOne[C], limiter: anyio.CapacityLimiter, slots: list[ToolCallRecord | None], index: int, call: C
) -> None:
    def keep(record: ToolCallRecord) -> None:
        slots[index] = record

    async with limiter:
        await run_one(call, keep)


async def run_in_batches(
    calls: Sequence[C],
    run_one: RunOne[C],
    *,
    limit: int,
    done: Callable[[ToolCallRecord], None],
    after: Callable[[], Awaitable[None]],
) -> None:
    """Run ``calls`` with ``run_one(call, done)``; see the module's invariants."""
    limiter = anyio.CapacityLimiter(max(1, limit))
    for batch in _batches(calls):
        if len(batch) == 1:
            await run_one(batch[0], done)
        else:
            slots: list[ToolCallRecord | None] = [None] * len(batch)
            try:
                async with anyio.create_task_group() as group:
                    for index, call in enumerate(batch):
                        group.start_soon(_one, run_one, limiter, slots, index, call)
            finally:
                for record in slots:
                    if record is not None:
                        done(record)
        with anyio.CancelScope(shield=True):
            await after()
