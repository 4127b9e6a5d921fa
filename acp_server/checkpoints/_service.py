"""The rewind a user asks for (``/rewind``, ``_acp-server/rewind``, the daemon's route): the session's prompts as a
list, a preview, and the rewind itself — files first (each atomically; conflicts stop it unless forced), then the
conversation (one record: what the model sees ends before prompt N; the history keeps everything). Run again after a
kill, it finds the restored files right and does the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..domain import Message
from ..tools import EditorWriter, Workspace
from ._exceptions import NoSuchPromptError, RewindUnavailableError
from ._rewind import RewindPlan, apply, plan
from ._session import SessionCheckpoints

__all__ = ["PromptEntry", "RewindOutcome", "Rewindable", "list_prompts", "preview", "rewind"]


@runtime_checkable
class Rewindable(Protocol):
    """A session as a rewind sees it (the bridge's ``SessionEntry``)."""

    @property
    def cwd(self) -> str: ...

    @property
    def additional_directories(self) -> tuple[str, ...]: ...

    @property
    def checkpoints(self) -> SessionCheckpoints | None: ...

    def prompt_seqs(self) -> list[tuple[int, Message]]: ...

    async def rewind_conversation(self, start: int, /) -> object: ...


@dataclass(frozen=True, slots=True)
class PromptEntry:
    """A prompt the model still sees: its number (1 first), its message's seq, its first line, the files it
    changed (None: its checkpoint is not kept)."""

    number: int
    seq: int
    first_line: str
    files: tuple[str, ...] | None

    def wire(self) -> dict[str, Any]:
        return {"number": self.number, "firstLine": self.first_line, "files": self.files}


@dataclass(slots=True)
class RewindOutcome:
    number: int
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    conversation: bool = False

    def wire(self) -> dict[str, Any]:
        return {
            "prompt": self.number,
            "restored": self.restored,
            "removed": self.removed,
            "failed": self.failed,
            "conversationRewound": self.conversation,
        }

    def text(self, files: bool) -> str:
        parts = []
        if files:
            changed = len(self.restored) + len(self.removed)
            parts.append(
                f"{changed} file{'' if changed == 1 else 's'} put back as before prompt {self.number}"
                + (f" ({len(self.removed)} removed)" if self.removed else "")
            )
        if self.conversation:
            parts.append(f"the conversation now ends before prompt {self.number} (its turns stay in the history)")
        text = f"Rewound: {'; '.join(parts)}."
        if self.failed:
            text += "\nNot restored:\n" + "\n".join(f"- {line}" for line in self.failed)
        return text


def _workspace(session: Rewindable) -> Workspace:
    return Workspace(session.cwd, session.additional_directories)


def list_prompts(session: Rewindable) -> list[PromptEntry]:
    """The prompts the model still sees, numbered, with what each changed."""
    checkpoints = session.checkpoints
    workspace = _workspace(session)
    entries = []
    for number, (seq, message) in enumerate(session.prompt_seqs(), start=1):
        manifest = None if checkpoints is None else checkpoints.manifest(seq)
        files = None if manifest is None else tuple(workspace.relative(path) for path in sorted(manifest.files))
        first = message.content.strip().split("\n", 1)[0] if message.content.strip() else ""
        entries.append(PromptEntry(number, seq, first[:100], files))
    return entries


def _from(session: Rewindable, number: int) -> tuple[list[int], list[int]]:
    prompts = session.prompt_seqs()
    if not 1 <= number <= len(prompts):
        raise NoSuchPromptError(number, len(prompts))
    return [seq for seq, _ in prompts[number - 1 :]], list(range(number, len(prompts) + 1))


async def _plan(session: Rewindable, number: int, diffs: bool) -> tuple[SessionCheckpoints, RewindPlan]:
    seqs, numbers = _from(session, number)
    checkpoints = session.checkpoints
    if checkpoints is None:
        raise RewindUnavailableError(number)
    return checkpoints, await plan(checkpoints, seqs, numbers, _workspace(session), diffs=diffs)


async def preview(session: Rewindable, number: int) -> dict[str, Any]:
    """What ``rewind(number)`` would do to the files (each with its diff, now → restored) and its conflicts."""
    _, rewind_plan = await _plan(session, number, True)
    files = [
        {"path": f.path, "action": f.action, "conflict": f.conflict, "problem": f.problem, "diff": f.diff}
        for f in rewind_plan.files
        if f.action != "none" or f.problem is not None
    ]
    return {"prompt": number, "files": files, "conflicts": rewind_plan.conflicts}


async def rewind(
    session: Rewindable,
    number: int,
    *,
    files: bool = True,
    conversation: bool = True,
    force: bool = False,
    writer: EditorWriter | None = None,
) -> RewindOutcome:
    """Rewind to before prompt ``number``: its files (``files``) then its conversation (``conversation``). Raises
    :class:`~._exceptions.CheckpointError` before changing anything when it cannot be done."""
    seqs: Sequence[int] = _from(session, number)[0]
    outcome = RewindOutcome(number)
    if files:
        checkpoints, rewind_plan = await _plan(session, number, False)
        outcome.failed = await apply(checkpoints, rewind_plan, _workspace(session), writer, force=force)
        failed = {line.split(": ", 1)[0] for line in outcome.failed}
        for file in rewind_plan.changes:
            if file.rel not in failed:
                (outcome.removed if file.target is None else outcome.restored).append(file.rel)
    if conversation:
        await session.rewind_conversation(seqs[0])
        outcome.conversation = True
    return outcome
