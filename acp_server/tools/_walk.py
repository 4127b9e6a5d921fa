"""The walk of a directory of the project that glob and grep share: depth first, names sorted, bounded.

Skips every ``.git`` entry and what ``.gitignore`` hides (see :mod:`._gitignore`; the start directory itself is
walked even when ignored: the caller named it); never enters a symbolic link (a linked directory is yielded as a
link, not walked, so nothing outside the project is reached through one). It stops after ``max_entries`` entries
(``truncated`` says so) or as soon as ``stop`` is set (the tool call was cancelled: the walk runs in a worker
thread that cancellation cannot interrupt otherwise).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from ._gitignore import IgnoreChain, Ignores

__all__ = ["MAX_WALK_ENTRIES", "Entry", "Walk", "WalkStopped", "sorted_entries"]

MAX_WALK_ENTRIES = 200_000


class WalkStopped(Exception):
    """The walk's ``stop`` event was set."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A walked entry: ``real`` its path on disk (its directory has no symbolic link), ``rel`` its path as the
    model writes it (the start's label, then the names below it), ``is_link`` for a symbolic link (never walked;
    ``is_dir`` is then False)."""

    real: str
    rel: str
    name: str
    is_dir: bool
    is_link: bool


def sorted_entries(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as scan:
            return sorted(scan, key=lambda entry: entry.name)
    except OSError:
        return []  # unreadable (permission, vanished): nothing to walk there


class Walk:
    """An iterable walk of ``start`` (a real directory path); ``label`` prefixes the yielded ``rel`` paths
    (``""`` for the project directory, else ``"src/"``-like); ``max_depth`` 1 yields only ``start``'s entries."""

    def __init__(
        self,
        root: str,
        start: str,
        label: str,
        *,
        stop: threading.Event,
        max_depth: int | None = None,
        max_entries: int = MAX_WALK_ENTRIES,
    ) -> None:
        self._ignores = Ignores(root)
        self._start = start
        self._label = label
        self._stop = stop
        self._max_depth = max_depth
        self._max_entries = max_entries
        self.visited = 0
        self.ignored = 0
        self.truncated = False

    def __iter__(self) -> Iterator[Entry]:
        levels: list[tuple[Iterator[os.DirEntry[str]], str, str, IgnoreChain, int]] = [
            (
                iter(sorted_entries(self._start)),
                self._start,
                self._label,
                self._ignores.chain_for(self._start),
                1,
            )
        ]
        while levels:
            entries, directory, label, chain, depth = levels[-1]
            entry = next(entries, None)
            if entry is None:
                levels.pop()
                continue
            if entry.name == ".git":
                continue
            if self._stop.is_set():
                raise WalkStopped
            self.visited += 1
            if self.visited > self._max_entries:
                self.truncated = True
                return
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            real = os.path.join(directory, entry.name)
            if Ignores.ignored(chain, real, is_dir):
                self.ignored += 1
                continue
            rel = label + entry.name
            yield Entry(real, rel, entry.name, is_dir, is_link)
            if is_dir and (self._max_depth is None or depth < self._max_depth):
                levels.append(
                    (iter(sorted_entries(real)), real, rel + "/", self._ignores.extend(chain, real), depth + 1)
                )
