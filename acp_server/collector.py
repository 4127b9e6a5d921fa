"""The cyclic garbage collector and the objects a process imports.

An agent's start is mostly imports (the ACP schema's and the model SDK's pydantic models, pygls' LSP types): about
10^6 objects that live as long as the process. Left to the collector, they cost dozens of passes that free nothing
while they are imported (about a tenth of the CPU a start costs), then a walk over all of them in every full
collection (100–170 ms of stalled event loop under load). :func:`paused_for_imports` pauses the collector around
such a stretch and freezes what the process holds at its end (``gc.freeze``: out of every later collection's view).
It never leaves the collector paused: the window closes in ``finally``, and of two overlapping windows (the main
thread's and the warm-up thread's) the first to close resumes it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_for_imports"]


@contextmanager
def paused_for_imports(*, freeze: bool = True) -> Iterator[None]:
    """Run the body with the collector paused; then freeze what the process holds (unless ``freeze`` is false) and
    resume the collector (if it ran before)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if running:
            gc.enable()
