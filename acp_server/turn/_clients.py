"""The model runner's openai clients: the one for the current endpoint, and those a change of endpoint replaced.

Invariant: a client replaced while turns may still stream through it (an editor's ``providers/set`` in the middle
of a turn) is not closed at once: it is kept, at most :data:`RETIRED_KEPT` of them (the oldest closed first, so
memory stays bounded whatever a client sends), and every client is closed with the runner.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["RETIRED_KEPT", "ClientSlot"]

RETIRED_KEPT = 2
"""Replaced clients kept open for the turns that started on them."""


class ClientSlot:
    """The current client (None until made) and the retired ones."""

    __slots__ = ("_retired", "current")

    def __init__(self) -> None:
        self.current: AsyncOpenAI | None = None
        self._retired: deque[AsyncOpenAI] = deque()

    async def retire(self) -> None:
        """The endpoint changed: the next request makes a new client; this one is kept for its running turns."""
        old, self.current = self.current, None
        if old is not None:
            self._retired.append(old)
        while len(self._retired) > RETIRED_KEPT:
            with anyio.CancelScope(shield=True):
                await self._retired.popleft().close()

    async def aclose(self) -> None:
        """Close every client, the current one and the retired ones. Idempotent."""
        clients = [*self._retired, *([self.current] if self.current is not None else [])]
        self.current = None
        self._retired.clear()
        with anyio.CancelScope(shield=True):
            for client in clients:
                await client.close()
