"""The tools' side of checkpoints: what a write, an edit or a command tells the session's checkpoints before and
after it changes the project, so ``/rewind`` can undo it.

The recorder is the running prompt's (a context variable the bridge sets around each prompt: the tools know no
session); with none set nothing is recorded. A recorder never makes a call fail: whatever goes wrong is its to note.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

from ._workspace import Target, Workspace

__all__ = ["CheckpointRecorder", "checkpoints_used", "current_recorder"]


class CheckpointRecorder(Protocol):
    """What a tool call tells the running prompt's checkpoints (every method runs before or after the change)."""

    async def before_change(self, target: Target) -> None:
        """``target`` is about to be written (its state now is saved unless this prompt saved it already)."""
        ...

    async def after_change(self, target: Target) -> None:
        """``target`` was written by the agent: its state now is what a rewind may overwrite without asking."""
        ...

    async def before_command(self, workspace: Workspace) -> object:
        """A command is about to run in ``workspace``: the roots' state now (an opaque snapshot)."""
        ...

    async def after_command(self, snapshot: object) -> str:
        """The command ended: what changed since ``snapshot`` is recorded; returns a note for the call's result
        (``""``: nothing to say; else e.g. why the snapshot was skipped)."""
        ...


_RECORDER: ContextVar[CheckpointRecorder | None] = ContextVar("acp_server_checkpoints", default=None)


def current_recorder() -> CheckpointRecorder | None:
    """The running prompt's checkpoint recorder, None when nothing records."""
    return _RECORDER.get()


@contextlib.contextmanager
def checkpoints_used(recorder: CheckpointRecorder | None) -> Iterator[None]:
    """Tool calls made inside the block record into ``recorder``."""
    token = _RECORDER.set(recorder)
    try:
        yield
    finally:
        _RECORDER.reset(token)
