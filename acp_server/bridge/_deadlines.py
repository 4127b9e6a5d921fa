"""The deadline reaper: expires prompts still waiting in a FIFO when their deadline passes.

Invariants: while the reaper runs, every watched prompt that has not settled is expired at its deadline, never
before (a running prompt is stopped by its own cancel scope; expiring it here only settles what is left); a settled
prompt is forgotten at once, and the heap is compacted so it never outgrows twice the watched prompts plus 64.
"""

from __future__ import annotations

import heapq
import math

import anyio
from anyio.abc import TaskGroup

from ._prompt import PromptJob

__all__ = ["DeadlineWatch"]


class DeadlineWatch:
    """The prompts with a deadline, by key, and the one task that expires them (started by :meth:`start`)."""

    __slots__ = ("_heap", "_scope", "_wakeup", "_watched")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []  # (deadline, key); settled keys are skipped
        self._watched: dict[int, PromptJob] = {}  # unsettled prompts with a deadline, by key
        self._wakeup: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None

    def start(self, tg: TaskGroup) -> None:
        """Start the reaper in ``tg`` (the bridge's task group, once, as it opens)."""
        self._wakeup = anyio.Event()
        self._scope = anyio.CancelScope()
        tg.start_soon(self._reap, self._scope, name="SessionBridge deadline reaper")

    def stop(self) -> None:
        """Stop the reaper (the bridge is closing: every prompt is being settled by the close)."""
        if self._scope is not None:
            self._scope.cancel()

    def watch(self, deadline: float, job: PromptJob) -> None:
        """Expire ``job`` at ``deadline`` (anyio time) unless it settles first."""
        self._watched[job.key] = job
        heapq.heappush(self._heap, (deadline, job.key))
        if self._heap[0][1] == job.key and self._wakeup is not None:
            self._wakeup.set()

    def forget(self, job: PromptJob) -> None:
        """``job`` settled: never expire it; compact the heap once settled keys dominate it."""
        if self._watched.pop(job.key, None) is not None and len(self._heap) > 2 * len(self._watched) + 64:
            self._heap = [entry for entry in self._heap if entry[1] in self._watched]
            heapq.heapify(self._heap)

    async def _reap(self, scope: anyio.CancelScope) -> None:
        """Expire waiting prompts at their deadline (running ones are stopped by their own scope)."""
        with scope:
            while True:
                current = anyio.current_time()
                while self._heap and self._heap[0][0] <= current:
                    _, key = heapq.heappop(self._heap)
                    job = self._watched.get(key)
                    if job is not None:
                        job.expire()
                self._wakeup = wakeup = anyio.Event()
                next_deadline = self._heap[0][0] if self._heap else math.inf
                with anyio.CancelScope(deadline=next_deadline):
                    await wakeup.wait()
