"""The mode wins over a pending answer: a permission request is withdrawn when the session's mode stops offering
the call's tool (a switch to ``read-only`` while a ``write_file`` waits), and an answer that comes after such a
switch is a rejection, whatever it says."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio

from ..tools import PermissionChoice

__all__ = ["WITHDRAWN", "ModeSource", "ModeWatch", "ask_while_offered"]

WITHDRAWN = (
    "This {name} call did not run: while it waited, the session was switched to the '{mode}' mode, which does not "
    "offer it. Continue with the tools this mode offers."
)
"""What the model is told of a withdrawn call."""


class ModeSource(Protocol):
    """A session's mode now, and a wait for its next change."""

    @property
    def mode(self) -> str: ...

    async def mode_switched(self) -> None: ...


class ModeWatch:
    """Whether ``session``'s mode still offers a tool it offered when the watch was made (at a call's start;
    ``offered``: the tools a mode offers). A tool it did not offer then is not its business (always offered)."""

    __slots__ = ("_offered", "_start", "session")

    def __init__(self, session: ModeSource, offered: Callable[[str], tuple[str, ...]]) -> None:
        self.session = session
        self._offered = offered
        self._start = offered(session.mode)

    @property
    def mode(self) -> str:
        return self.session.mode

    def offers(self, tool: str) -> bool:
        return tool not in self._start or tool in self._offered(self.session.mode)


async def ask_while_offered(
    watch: ModeWatch, tool: str, ask: Callable[[], Awaitable[PermissionChoice]]
) -> PermissionChoice | None:
    """``ask()``'s answer while the mode offers ``tool``; None when it stops offering it before the answer (then
    ``ask`` is cancelled at the switch: the request is withdrawn, a late answer never read) or by the time the
    answer is taken. Cancellation propagates."""
    answers: list[PermissionChoice] = []
    async with anyio.create_task_group() as tasks:

        async def withdraw() -> None:
            while watch.offers(tool):
                await watch.session.mode_switched()
            tasks.cancel_scope.cancel()

        tasks.start_soon(withdraw)
        answers.append(await ask())
        tasks.cancel_scope.cancel()
    return answers[0] if answers and watch.offers(tool) else None
