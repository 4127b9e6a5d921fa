"""One session's checkpoints: each prompt's manifest (every file it changed, with the file's state before the prompt's
first change to it), the blobs those states are, and what the agent last left each file as.

Layout of ``<state dir>/checkpoints/<session id>/``: ``prompts/<seq>.json`` (``{"seq", "files": {real path: blob
hash, or null for a file that did not exist}}``, written when the prompt begins, rewritten as it changes files),
``known.json`` (real path → the hash the agent's last change left, null: removed), ``blobs/`` (:mod:`._disk`).
A prompt whose manifest is missing cannot have its files restored (the cap dropped it). The directory is bounded by
:attr:`SessionCheckpoints.cap` bytes: past it, the oldest prompts' manifests go first (never the running one's),
then the blobs nothing needs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
from dataclasses import dataclass

import anyio

from ..tools import Target, Workspace
from ._disk import blob_path, digest, put_blob, read_json, write_json
from ._scan import MAX_FILE_BYTES, Scan, StatCache, scan_roots

__all__ = ["DEFAULT_CAP_BYTES", "Manifest", "SessionCheckpoints"]

logger = logging.getLogger("acp_server.checkpoints")

DEFAULT_CAP_BYTES = 512 * 1024 * 1024
"""The disk one session's checkpoints may take; past it the oldest prompts' checkpoints are dropped."""

_MANIFEST = re.compile(r"(\d{12})\.json")


@dataclass(slots=True)
class Manifest:
    """A prompt's checkpoint: ``files`` maps each real path it changed to its state before (a blob hash; None: it
    did not exist)."""

    seq: int
    files: dict[str, str | None]


def file_state(real: str) -> tuple[str | None, bytes | None]:
    """The hash and bytes of the regular file ``real`` now; (None, None) when there is none (a directory or a link
    there reads as ``"other"``)."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except OSError:
        return "other", None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "other", None
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_FILE_BYTES * 4 + 1)
    finally:
        os.close(fd)
    return digest(data), data


class SessionCheckpoints:
    """The checkpoints of one session, and the recorder the tools tell of their changes
    (:class:`~acp_server.tools.CheckpointRecorder`) while one of its prompts runs (:meth:`begin`)."""

    def __init__(self, directory: str, cap: int = DEFAULT_CAP_BYTES) -> None:
        self.directory = directory
        self.cap = cap
        self.current: int | None = None
        self._manifest: Manifest | None = None
        self._cache: StatCache = {}

    # -- the prompt's lifetime --------------------------------------------------------------------------------

    def begin(self, seq: int) -> None:
        """Prompt ``seq`` (its user message's number in the history) begins: its (empty) manifest is written (a
        small file, on the event loop: no thread hop at a turn's start)."""
        self.current = seq
        self._manifest = Manifest(seq, {})
        try:
            write_json(self._manifest_path(seq), {"seq": seq, "files": {}}, sync=False)
        except OSError as exc:  # no checkpoint for this prompt: its files cannot be rewound, the turn goes on
            logger.warning("checkpoints: cannot write in %s (%s)", self.directory, exc)
            self._manifest = None

    def end(self) -> None:
        self.current = None
        self._manifest = None

    def _manifest_path(self, seq: int) -> str:
        return os.path.join(self.directory, "prompts", f"{seq:012d}.json")

    def _save_manifest(self) -> None:
        manifest = self._manifest
        if manifest is not None:
            write_json(self._manifest_path(manifest.seq), {"seq": manifest.seq, "files": manifest.files})

    def manifest(self, seq: int) -> Manifest | None:
        """Prompt ``seq``'s checkpoint, None when none is kept."""
        value = read_json(self._manifest_path(seq))
        if not isinstance(value, dict) or not isinstance(value.get("files"), dict):
            return None
        files = {str(path): (sha if isinstance(sha, str) else None) for path, sha in value["files"].items()}
        return Manifest(seq, files)

    def known(self) -> dict[str, str | None]:
        value = read_json(os.path.join(self.directory, "known.json"))
        return (
            {str(k): (v if isinstance(v, str) else None) for k, v in value.items()} if isinstance(value, dict) else {}
        )

    def save_known(self, known: dict[str, str | None]) -> None:
        write_json(os.path.join(self.directory, "known.json"), known)

    def blob(self, sha: str) -> bytes:
        """The content kept under ``sha``; a missing or damaged blob raises ``OSError``."""
        with open(blob_path(self.directory, sha), "rb") as file:
            data = file.read()
        if digest(data) != sha:
            raise OSError(f"checkpoint content {sha[:12]} is damaged")
        return data

    def _put(self, data: bytes) -> str:
        return put_blob(self.directory, data)

    def _kept(self, sha: str) -> bool:
        return os.path.exists(blob_path(self.directory, sha))

    # -- the recorder -----------------------------------------------------------------------------------------

    async def before_change(self, target: Target) -> None:
        manifest = self._manifest
        if manifest is None or target.real in manifest.files:
            return
        await anyio.to_thread.run_sync(self._save_prior, manifest, {target.real})

    def _save_prior(self, manifest: Manifest, paths: set[str]) -> None:
        for real in sorted(paths):
            if real in manifest.files:
                continue
            sha, data = file_state(real)
            if sha == "other":
                continue  # not a regular file: nothing a rewind could put back
            manifest.files[real] = None if data is None else self._put(data)
        self._save_manifest()

    async def after_change(self, target: Target) -> None:
        if self._manifest is None:
            return
        states: dict[str, str | None] = {target.real: None}
        await anyio.to_thread.run_sync(self._record_after, states, False)

    def _record_after(self, states: dict[str, str | None], known_states: bool) -> None:
        known = self.known()
        for real, state in states.items():
            known[real] = state if known_states else file_state(real)[0]
        self.save_known(known)
        self._prune()

    async def before_command(self, workspace: Workspace) -> object:
        if self._manifest is None:
            return None
        roots = [root.real for root in workspace.roots]
        return await anyio.to_thread.run_sync(lambda: scan_roots(roots, self._cache, self._put, self._kept))

    async def after_command(self, snapshot: object) -> str:
        manifest = self._manifest
        if manifest is None or not isinstance(snapshot, Scan):
            return ""
        if snapshot.skipped:
            return (
                f"(No checkpoint of this command: {snapshot.skipped}. What it changed cannot be undone with /rewind.)"
            )
        return await anyio.to_thread.run_sync(self._command_ended, manifest, snapshot)

    def _command_ended(self, manifest: Manifest, before: Scan) -> str:
        after = scan_roots(before.roots, self._cache, digest)
        if after.skipped:
            return f"(No checkpoint of this command: {after.skipped}. What it changed cannot be undone with /rewind.)"
        changed = {
            path
            for path in before.files.keys() | after.files.keys()
            if before.files.get(path) != after.files.get(path) and path not in before.large | after.large
        }
        for path in sorted(changed):
            manifest.files.setdefault(path, before.files.get(path))
        if changed:
            self._save_manifest()
            self._record_after({path: after.files.get(path) for path in changed}, True)
        return ""

    # -- the cap ----------------------------------------------------------------------------------------------

    def prompts(self) -> list[int]:
        """The seqs of the prompts whose checkpoint is kept, oldest first."""
        try:
            names = os.listdir(os.path.join(self.directory, "prompts"))
        except OSError:
            return []
        return sorted(int(match[1]) for name in names if (match := _MANIFEST.fullmatch(name)))

    def _blobs(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for top, _, names in os.walk(os.path.join(self.directory, "blobs")):
            for name in names:
                if len(name) == 64:
                    with contextlib.suppress(OSError):
                        sizes[name] = os.stat(os.path.join(top, name)).st_size
        return sizes

    def disk_usage(self) -> int:
        """The bytes the kept contents take."""
        return sum(self._blobs().values())

    def _prune(self) -> None:
        """Keep the directory under :attr:`cap`: drop the oldest prompts' checkpoints (never the running one's), then
        the contents no checkpoint needs (the last command's snapshot last)."""
        blobs = self._blobs()
        if sum(blobs.values()) <= self.cap:
            return
        prompts = [seq for seq in self.prompts() if seq != self.current]
        base = {sha for _, sha in self._cache.values()}
        while True:
            needed: set[str] = set()
            for seq in [*prompts, *([] if self.current is None else [self.current])]:
                manifest = self._manifest if seq == self.current else self.manifest(seq)
                if manifest is not None:
                    needed.update(sha for sha in manifest.files.values() if sha)
            for sha in list(blobs):
                if sha not in needed and sha not in base:
                    with contextlib.suppress(OSError):
                        os.unlink(blob_path(self.directory, sha))
                    del blobs[sha]
            if sum(blobs.values()) <= self.cap:
                return
            if prompts:
                seq = prompts.pop(0)
                logger.info("checkpoints: prompt %d's checkpoint dropped (the cap is %d bytes)", seq, self.cap)
                with contextlib.suppress(OSError):
                    os.unlink(self._manifest_path(seq))
            elif base:
                base = set()
                self._cache.clear()
            else:
                return

    def remove(self) -> None:
        """Remove every checkpoint of the session (it was deleted)."""
        shutil.rmtree(self.directory, ignore_errors=True)
