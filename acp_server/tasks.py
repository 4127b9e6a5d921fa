"""Ground-floor helpers for resources that own tasks: their lifecycle, and a task group held across
``__aenter__`` / ``__aexit__``.

A resource (bridge, daemon, SDK session client) is unopened → open → (closing →) closed; it opens once, never
reopens, and every task it starts belongs to the one task group it holds while open.
"""

from __future__ import annotations

import enum
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

__all__ = ["Lifecycle", "OwnedTaskGroup"]


class Lifecycle(enum.Enum):
    """Where a resource is in its life; ``CLOSING`` is for those that drain before they close."""

    UNOPENED = "unopened"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class OwnedTaskGroup:
    """A task group entered in one method and left in another.

    :meth:`exit` leaves the group so that an error of the owner's ``async with`` body propagates unchanged (not
    wrapped in an exception group): the owner must have told its tasks to stop before it calls :meth:`exit`.
    Cancellation, and a clean exit, go to the group as usual.
    """

    __slots__ = ("_tg",)

    def __init__(self) -> None:
        self._tg: TaskGroup | None = None

    @property
    def group(self) -> TaskGroup:
        if self._tg is None:
            raise RuntimeError("the task group is not entered")
        return self._tg

    async def enter(self) -> TaskGroup:
        if self._tg is not None:
            raise RuntimeError("the task group is already entered")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return tg

    async def exit(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> bool | None:
        """Wait for the tasks, then leave; returns what ``TaskGroup.__aexit__`` does (None for a body error)."""
        tg, self._tg = self._tg, None
        if tg is None:
            return None
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            await tg.__aexit__(None, None, None)  # the body's error propagates as is
            return None
        return await tg.__aexit__(exc_type, exc, tb)
