"""Where checkpoints live: ``checkpoints/<session id>/`` in the agent's state directory (beside ``sessions.db``),
never in the user's project nor its ``.git``. A store with no directory (in memory, PostgreSQL) keeps them in a
private temporary directory of the process (``0700``), removed when the bridge closes."""

from __future__ import annotations

import os
import re
import shutil
import tempfile

import anyio

from ._session import DEFAULT_CAP_BYTES, SessionCheckpoints

__all__ = ["CheckpointRoot"]

_SAFE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def _name(session_id: str) -> str:
    """A directory name for ``session_id`` (an id that is not a plain name is hashed: never a path)."""
    if _SAFE_ID.fullmatch(session_id) and session_id not in (".", ".."):
        return session_id
    import hashlib

    return "h-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


class CheckpointRoot:
    """The directory holding every session's checkpoints (made on first use)."""

    def __init__(self, directory: str, *, temporary: bool = False, cap: int = DEFAULT_CAP_BYTES) -> None:
        self.directory = directory
        self.temporary = temporary
        self.cap = cap

    @classmethod
    def beside(cls, location: str) -> CheckpointRoot:
        """The checkpoints of a store at ``location`` (a database file: beside it; else a temporary directory)."""
        if location and location != ":memory:" and os.path.isabs(location) and "://" not in location:
            return cls(os.path.join(os.path.dirname(location), "checkpoints"))
        return cls(tempfile.mkdtemp(prefix="acp-server-checkpoints-"), temporary=True)

    def session(self, session_id: str) -> SessionCheckpoints:
        return SessionCheckpoints(os.path.join(self.directory, _name(session_id)), self.cap)

    def _has(self, session_id: str) -> bool:
        """Whether the session has checkpoints (a stat on the event loop: most sessions have none to move)."""
        return os.path.isdir(self.session(session_id).directory)

    async def remove(self, session_id: str) -> None:
        """Remove a session's checkpoints (the session was deleted)."""
        if self._has(session_id):
            await anyio.to_thread.run_sync(self.session(session_id).remove)

    async def copy(self, source_id: str, child_id: str) -> None:
        """A fork's checkpoints: a copy of its source's (rewinding the fork never touches its source's)."""
        source, child = self.session(source_id).directory, self.session(child_id).directory
        if self._has(source_id):
            await anyio.to_thread.run_sync(lambda: shutil.copytree(source, child, dirs_exist_ok=True))

    def close(self) -> None:
        if self.temporary:
            shutil.rmtree(self.directory, ignore_errors=True)
