"""The checkpoints' failures: what a rewind refuses, with what the user can do about it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..errors import ServerError

__all__ = [
    "CheckpointError",
    "NoSuchPromptError",
    "RewindBusyError",
    "RewindConflictError",
    "RewindUnavailableError",
]


class CheckpointError(ServerError):
    """A rewind cannot be done as asked; nothing was changed."""

    error_kind: ClassVar[str] = "rewind_refused"


class NoSuchPromptError(CheckpointError):
    """The prompt number names no prompt of the session's conversation."""

    error_kind: ClassVar[str] = "invalid_params"

    def __init__(self, number: int, count: int) -> None:
        which = f"1 to {count}" if count else "none yet"
        super().__init__(f"there is no prompt {number} to rewind to (prompts: {which}); /rewind lists them")
        self.number, self.count = number, count

    def details(self) -> Mapping[str, object]:
        return {"prompt": self.number, "prompts": self.count}


class RewindUnavailableError(CheckpointError):
    """The files of a prompt from N on cannot be restored: its checkpoint is gone (the disk cap dropped it, or it
    was made before checkpoints were kept)."""

    def __init__(self, number: int) -> None:
        super().__init__(
            f"the files cannot be restored: prompt {number}'s checkpoint is not kept (the disk cap dropped it, or it "
            "predates checkpoints); use --conversation-only to rewind the conversation alone"
        )
        self.number = number

    def details(self) -> Mapping[str, object]:
        return {"prompt": self.number}


class RewindConflictError(CheckpointError):
    """Files changed since the agent last changed them (by someone else): the rewind stopped before writing."""

    error_kind: ClassVar[str] = "rewind_conflict"

    def __init__(self, paths: list[str]) -> None:
        listed = "\n".join(f"- {path}" for path in paths)
        super().__init__(
            f"Rewind stopped: {len(paths)} file{'' if len(paths) == 1 else 's'} changed since the agent last changed "
            f"{'it' if len(paths) == 1 else 'them'}; nothing was restored:\n{listed}\nRun it again with --force to "
            "overwrite them."
        )
        self.paths = paths

    def details(self) -> Mapping[str, object]:
        return {"conflicts": self.paths}


class RewindBusyError(CheckpointError):
    """A programmatic rewind while the session has a prompt running or waiting (``/rewind`` waits its turn in the
    session's queue; the extension method and the REST route do not queue)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} has a prompt running or waiting; rewind once it has ended")
        self.session_id = session_id

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id}
