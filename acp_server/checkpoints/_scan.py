"""What a command may change: the files of the session's roots, hashed before and after it runs.

The walk is the tools' (``.git`` and what ``.gitignore`` hides are skipped, symbolic links are not followed nor
recorded). It is bounded: a snapshot of more than :data:`MAX_SCAN_FILES` files, or of more than
:data:`MAX_SCAN_BYTES` bytes of files, is skipped whole (the call's result says so: what that command changes cannot
be rewound); a file over :data:`MAX_FILE_BYTES` is left out of it. A file's hash is remembered by its stat (size,
mtime, ctime, inode), so a file unchanged since the last snapshot is not read again.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..tools import Walk

__all__ = ["MAX_FILE_BYTES", "MAX_SCAN_BYTES", "MAX_SCAN_FILES", "Scan", "StatCache", "scan_roots"]

MAX_SCAN_FILES = 10_000
"""A command's snapshot is skipped when the roots hold more files than this (ignored ones not counted)."""

MAX_SCAN_BYTES = 128 * 1024 * 1024
"""A command's snapshot is skipped when the roots' files add up to more bytes than this."""

MAX_FILE_BYTES = 10 * 1024 * 1024
"""A file larger than this is left out of a command's snapshot (the file tools refuse such files too)."""

StatKey = tuple[int, int, int, int]
StatCache = dict[str, tuple[StatKey, str]]
"""real path → (its stat key, its content's hash) as last read."""


@dataclass(slots=True)
class Scan:
    """The roots' files (real path → content hash) at one moment, or why there is no snapshot (``skipped``)."""

    files: dict[str, str] = field(default_factory=dict)
    skipped: str = ""
    roots: tuple[str, ...] = ()
    large: set[str] = field(default_factory=set)
    """Files left out for their size (a change to one is not recorded: it cannot be told from a creation)."""


def _key(info: os.stat_result) -> StatKey:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def scan_roots(
    roots: Sequence[str],
    cache: StatCache,
    hash_of: Callable[[bytes], str],
    kept: Callable[[str], bool] | None = None,
) -> Scan:
    """A snapshot of ``roots`` (real paths). ``hash_of`` hashes a file's bytes (and, taken before a command, keeps
    them: then ``kept`` says whether a hash's content is still kept, so an unchanged file is read again only when
    it is not). ``cache`` is read and updated."""
    found: list[tuple[str, os.stat_result]] = []
    total = 0
    seen: set[str] = set()
    large: set[str] = set()
    for root in roots:
        walk = Walk(root, root, "", stop=threading.Event(), max_entries=MAX_SCAN_FILES * 4)
        for entry in walk:
            if entry.is_dir or entry.is_link or entry.real in seen:
                continue
            try:
                info = os.stat(entry.real, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            if info.st_size > MAX_FILE_BYTES:
                large.add(entry.real)
                continue
            seen.add(entry.real)
            found.append((entry.real, info))
            total += info.st_size
            if len(found) > MAX_SCAN_FILES:
                return Scan(skipped=f"the project has more than {MAX_SCAN_FILES:,} files (ignored ones not counted)")
            if total > MAX_SCAN_BYTES:
                return Scan(skipped=f"the project's files add up to more than {MAX_SCAN_BYTES // 2**20} MiB")
        if walk.truncated:
            return Scan(skipped=f"the project has more than {MAX_SCAN_FILES:,} files (ignored ones not counted)")
    scan = Scan(roots=tuple(roots), large=large)
    for real, info in found:
        key = _key(info)
        cached = cache.get(real)
        if cached is not None and cached[0] == key and (kept is None or kept(cached[1])):
            scan.files[real] = cached[1]
            continue
        try:
            with open(real, "rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        sha = hash_of(data)
        cache[real] = (key, sha)
        scan.files[real] = sha
    return scan
