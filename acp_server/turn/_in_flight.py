"""The chat requests a runner has in flight, so that other traffic to the same server can wait for none."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

import anyio

__all__ = ["InFlight"]


class InFlight:
    """``with in_flight:`` around each chat request; :meth:`wait_none` returns once none is in flight (at once if
    none is). Invariant: the count is the number of ``with`` blocks entered and not yet left."""

    __slots__ = ("_count", "_none")

    def __init__(self) -> None:
        self._count = 0
        self._none: anyio.Event | None = None  # created by the first waiter, set when the count falls to 0

    def __enter__(self) -> None:
        self._count += 1

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._count -= 1
        if not self._count and self._none is not None:
            self._none.set()
            self._none = None

    def hold(self) -> Callable[[], None]:
        """Count one more in flight until the returned release is called (at most once counts)."""
        self.__enter__()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.__exit__(None, None, None)

        return release

    async def wait_none(self) -> None:
        while self._count:
            self._none = self._none or anyio.Event()
            await self._none.wait()
