"""Checkpoints: the state of every file a prompt changes, saved before its first change, so ``/rewind`` can put the
project back as it was before a prompt.

Above the tools (whose hooks tell the running prompt's :class:`SessionCheckpoints` of each write, edit and command:
``tools.CheckpointRecorder``) and below the commands and the bridge. The layout, the bounds and the cap are in
``_session`` and ``_scan``; the rewind itself (plan, conflicts, atomic restores) in ``_rewind``.
"""

from ._exceptions import (
    CheckpointError,
    NoSuchPromptError,
    RewindBusyError,
    RewindConflictError,
    RewindUnavailableError,
)
from ._rewind import FileRewind, RewindPlan, apply, plan
from ._root import CheckpointRoot
from ._scan import MAX_FILE_BYTES, MAX_SCAN_BYTES, MAX_SCAN_FILES
from ._service import PromptEntry, Rewindable, RewindOutcome, list_prompts, preview, rewind
from ._session import DEFAULT_CAP_BYTES, Manifest, SessionCheckpoints

__all__ = [
    "DEFAULT_CAP_BYTES",
    "MAX_FILE_BYTES",
    "MAX_SCAN_BYTES",
    "MAX_SCAN_FILES",
    "CheckpointError",
    "CheckpointRoot",
    "FileRewind",
    "Manifest",
    "NoSuchPromptError",
    "PromptEntry",
    "RewindBusyError",
    "RewindConflictError",
    "RewindOutcome",
    "RewindPlan",
    "RewindUnavailableError",
    "Rewindable",
    "SessionCheckpoints",
    "apply",
    "list_prompts",
    "plan",
    "preview",
    "rewind",
]
