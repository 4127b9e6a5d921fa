"""The watchdog of a local command's process group, for any process group the agent starts (an MCP stdio server's
too): the one :mod:`._guard` pipe, reachable through :func:`watched_group`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ._command import _unwatch, _watch

__all__ = ["watched_group"]


@asynccontextmanager
async def watched_group(pgid: int, cwd: str) -> AsyncIterator[bool]:
    """While inside, the process group ``pgid`` is killed (SIGKILL) if the agent dies, however it dies (kill -9
    included); yields whether a watchdog runs (False: none could start, logged). Leave it once the group is gone: the
    watchdog is then stopped and reaped."""
    watchdog, death_w = await _watch(pgid, cwd)
    try:
        yield watchdog is not None
    finally:
        await _unwatch(watchdog, death_w)
