"""A rewind of a session's files: every file the prompts from N on changed goes back to its state before prompt N.

:func:`plan` reads, changes nothing: for each file, its state now, the state to restore (the first of those prompts'
checkpoints that holds it) and whether it changed since the agent last left it (a *conflict*: someone else, e.g. the
user in the editor, changed it; a rewind then stops unless forced). A path is confined again when planned: resolved
anew (every symbolic link), it must still be itself and lie inside the session's roots; it is then written through
directory descriptors (the tools' race-safe writes). :func:`apply` restores file by file, each atomically (a
temporary file renamed; a removal is one ``unlink``), so a kill leaves each file before or after, and a rewind run
again finds the restored files already right and does the rest.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from ..errors import RemoteError
from ..tools import EditorWriter, Target, ToolCallError, Workspace, open_parent, remove_file, write_bytes_atomic
from ._exceptions import RewindConflictError, RewindUnavailableError
from ._session import SessionCheckpoints, file_state

__all__ = ["FileRewind", "RewindPlan", "apply", "plan"]

_DIFF_BYTES = 256 * 1024  # a preview's diff of larger (or binary) content is not shown


@dataclass(frozen=True, slots=True)
class FileRewind:
    """One file of a rewind: ``path`` as the session shows it, ``rel`` relative to the project, ``action``
    (``restore``, ``remove``, ``none``: already as it should be), ``conflict`` (changed since the agent's last
    change), ``problem`` (why it cannot be restored at all: left out), ``diff`` (now → restored; None: not shown)."""

    real: str
    path: str
    rel: str
    target: str | None
    action: str
    conflict: bool
    problem: str | None = None
    diff: str | None = None


@dataclass(frozen=True, slots=True)
class RewindPlan:
    files: tuple[FileRewind, ...]

    @property
    def conflicts(self) -> list[str]:
        return [file.rel for file in self.files if file.conflict]

    @property
    def changes(self) -> tuple[FileRewind, ...]:
        return tuple(file for file in self.files if file.action != "none" and file.problem is None)


def _text(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if len(data) > _DIFF_BYTES or b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _diff(rel: str, now: bytes | None, then: bytes | None) -> str | None:
    old, new = _text(now), _text(then)
    if old is None or new is None:
        return None
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}", n=3
    )
    return "".join(lines)


def _plan(
    checkpoints: SessionCheckpoints, seqs: Sequence[int], numbers: Sequence[int], workspace: Workspace, diffs: bool
) -> RewindPlan:
    targets: dict[str, str | None] = {}
    for seq, number in zip(seqs, numbers, strict=True):
        manifest = checkpoints.manifest(seq)
        if manifest is None:
            raise RewindUnavailableError(number)
        for real, prior in manifest.files.items():
            targets.setdefault(real, prior)
    known = checkpoints.known()
    files: list[FileRewind] = []
    for real in sorted(targets):
        target = targets[real]
        root = workspace.root_of(real)
        shown = workspace.target(real) if root is not None else None
        path, rel = (shown.path, shown.rel) if shown is not None else (real, real)
        problem = None
        if root is None:
            problem = "outside the session's directories now"
        elif os.path.realpath(real) != real:
            problem = "a directory on its path is now a symbolic link"
        now, data = file_state(real)
        if now == "other" and problem is None:
            problem = "no longer a regular file"
        action = "none" if now == target else ("remove" if target is None else "restore")
        conflict = action != "none" and problem is None and now != known.get(real, target)
        diff = None
        if diffs and action != "none" and problem is None:
            then = None if target is None else _safe_blob(checkpoints, target)
            diff = _diff(rel, data, then)
        files.append(FileRewind(real, path, rel, target, action, conflict, problem, diff))
    return RewindPlan(tuple(files))


def _safe_blob(checkpoints: SessionCheckpoints, sha: str) -> bytes | None:
    try:
        return checkpoints.blob(sha)
    except OSError:
        return None


async def plan(
    checkpoints: SessionCheckpoints, seqs: Sequence[int], numbers: Sequence[int], workspace: Workspace, *, diffs: bool
) -> RewindPlan:
    """What rewinding the prompts ``seqs`` (numbered ``numbers`` to the user) would do; changes nothing. Raises
    :class:`RewindUnavailableError` when one of them has no checkpoint kept."""
    return await anyio.to_thread.run_sync(_plan, checkpoints, seqs, numbers, workspace, diffs)


def _target(workspace: Workspace, file: FileRewind) -> Target:
    return workspace.target(file.real)


def _restore_local(checkpoints: SessionCheckpoints, target: Target, sha: str | None) -> None:
    if sha is None:
        remove_file(target)
    else:
        write_bytes_atomic(target, checkpoints.blob(sha))


async def apply(
    checkpoints: SessionCheckpoints,
    rewind: RewindPlan,
    workspace: Workspace,
    writer: EditorWriter | None,
    *,
    force: bool,
) -> list[str]:
    """Restore ``rewind``'s files (text files through the editor when it writes files, so its buffers follow);
    returns the files that could not be restored and why. Conflicts stop it before anything is written unless
    ``force``."""
    if rewind.conflicts and not force:
        raise RewindConflictError(rewind.conflicts)
    failed = [f"{file.rel}: {file.problem}" for file in rewind.files if file.problem is not None]
    done: dict[str, str | None] = {}
    for file in rewind.changes:
        target = _target(workspace, file)
        try:
            data = None if file.target is None else await anyio.to_thread.run_sync(checkpoints.blob, file.target)
            text = _text(data) if data is not None and writer is not None else None
            if text is not None and writer is not None:
                os.close(open_parent(target, create=True, verb="write")[0])  # its directories, confined
                await writer.write_text_file(target.path, text)
            else:
                await anyio.to_thread.run_sync(_restore_local, checkpoints, target, file.target)
        except (OSError, ToolCallError, RemoteError) as exc:
            failed.append(f"{file.rel}: {exc}")
            continue
        done[file.real] = file.target
    if done:
        await anyio.to_thread.run_sync(_remember, checkpoints, done)
    await anyio.to_thread.run_sync(_sweep, workspace, rewind)
    return failed


def _sweep(workspace: Workspace, rewind: RewindPlan) -> None:
    """Remove what an earlier rewind (or write) killed mid-file left beside the files of ``rewind``: the temporary
    files of the atomic writes (``.<name>.<8 hex>.tmp``), in each file's directory reached as a write reaches it."""
    by_directory: dict[str, list[FileRewind]] = {}
    for file in rewind.files:
        if file.problem is None:
            by_directory.setdefault(os.path.dirname(file.real), []).append(file)
    for files in by_directory.values():
        pattern = re.compile(
            "|".join(rf"\.{re.escape(os.path.basename(f.real)[:200])}\.[0-9a-f]{{8}}\.tmp" for f in files)
        )
        try:
            parent, _ = open_parent(_target(workspace, files[0]), create=False, verb="clean")
        except ToolCallError:
            continue
        try:
            for name in os.listdir(parent):
                if pattern.fullmatch(name):
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=parent)
        finally:
            os.close(parent)


def _remember(checkpoints: SessionCheckpoints, done: dict[str, str | None]) -> None:
    known = checkpoints.known()
    known.update(done)
    checkpoints.save_known(known)
