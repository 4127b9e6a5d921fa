"""Blocking work of a tool call (walking, reading, matching) in a worker thread, so the event loop keeps running.

Cancelling the call returns at once (the thread is abandoned) and sets the work's ``stop`` event: the work checks
it between steps and ends at the next check (a step that cannot check, a regular expression match, is bounded by
its own time budget).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

__all__ = ["in_thread"]

_T = TypeVar("_T")


async def in_thread(work: Callable[[threading.Event], _T]) -> _T:
    """``work(stop)`` in a worker thread; on cancellation ``stop`` is set and the call returns at once."""
    stop = threading.Event()
    try:
        return await anyio.to_thread.run_sync(work, stop, abandon_on_cancel=True)
    finally:
        stop.set()
