"""What ``.gitignore`` files hide, for the tools that walk the project (list_directory, glob, grep).

Supported (git's own semantics, see gitignore(5)): blank lines and ``#`` comments; ``\\#`` / ``\\!`` escapes;
trailing spaces stripped unless escaped; ``!`` re-includes; a trailing ``/`` matches directories only; a pattern
with a ``/`` at its start or middle is anchored to its file's directory, one without matches a name at any depth
below it; ``*``, ``?``, ``[...]`` and ``**`` as in :mod:`._globs`. Rules come from every ``.gitignore`` between the
repository's top (the nearest ancestor of the project directory holding ``.git``; the project directory itself
when there is none) and the directory walked, plus the top's ``.git/info/exclude``; a deeper file overrides a
shallower one and, within a file, the last matching rule wins. Not supported: ``core.excludesFile`` (the user's
global excludes) and git's index (a tracked file that matches a rule is hidden too). As in git, what is inside an
ignored directory is never looked at (the walk does not enter it), so it cannot be re-included.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from ._globs import Glob, Segment

__all__ = ["IgnoreChain", "IgnoreFile", "Ignores", "parse_ignore_file"]

_MAX_IGNORE_FILE_BYTES = 1024 * 1024


@dataclass(slots=True)
class _Rules:
    """Rules indexed so that the last one matching a path is found in a few dictionary look-ups for the usual
    shapes (``name``, ``*.ext``, ``prefix*``, ``/some/path``), the others tried last rule first; each index maps
    to the number of the latest rule of that shape (a later rule wins)."""

    names: dict[str, int] = field(default_factory=dict)
    suffixes: dict[str, int] = field(default_factory=dict)
    prefixes: dict[str, int] = field(default_factory=dict)
    paths: dict[str, int] = field(default_factory=dict)
    others: list[tuple[int, Segment | Glob]] = field(default_factory=list)  # latest first once sealed
    suffix_sizes: tuple[int, ...] = ()
    prefix_sizes: tuple[int, ...] = ()

    def add(self, number: int, pattern: str, anchored: bool) -> None:
        if anchored:
            glob = Glob(pattern)
            parts = glob.segments
            literal = [part.literal if part is not None else None for part in parts]
            if all(name is not None for name in literal):
                self.paths["/".join(name for name in literal if name is not None)] = number
            else:
                self.others.append((number, glob))
            return
        segment = Segment.parse("*" if pattern.count("*") == len(pattern) else pattern)
        if segment.literal is not None:
            self.names[segment.literal] = number
            return
        ends = segment.literal_ends
        if ends is not None and ends[0] == "" and ends[1]:
            self.suffixes[ends[1]] = number
        elif ends is not None and ends[1] == "" and ends[0]:
            self.prefixes[ends[0]] = number
        else:
            self.others.append((number, segment))

    @property
    def empty(self) -> bool:
        return not (self.names or self.suffixes or self.prefixes or self.paths or self.others)

    def seal(self) -> None:
        self.others.reverse()
        self.suffix_sizes = tuple(sorted({len(suffix) for suffix in self.suffixes}))
        self.prefix_sizes = tuple(sorted({len(prefix) for prefix in self.prefixes}))

    def latest(self, path: str) -> int:
        """The number of the last rule matching ``path`` (relative to the rules' directory); -1 when none."""
        name = path[path.rfind("/") + 1 :]
        best = self.names.get(name, -1)
        if self.paths:
            best = max(best, self.paths.get(path, -1))
        for size in self.suffix_sizes:
            if size > len(name):
                break
            best = max(best, self.suffixes.get(name[-size:], -1))
        for size in self.prefix_sizes:
            if size > len(name):
                break
            best = max(best, self.prefixes.get(name[:size], -1))
        for number, rule in self.others:
            if number <= best:
                break
            if rule.match(path if isinstance(rule, Glob) else name):
                return number
        return best


@dataclass(frozen=True, slots=True)
class IgnoreFile:
    """The rules of one ignore file; ``base`` is its directory's real path with a trailing separator."""

    base: str
    _for_dirs: _Rules
    _for_files: _Rules
    _negated: frozenset[int]

    def decide(self, path: str, is_dir: bool) -> bool | None:
        """For ``path`` (relative to ``base``): True ignored, False re-included (``!``), None no rule matches."""
        number = (self._for_dirs if is_dir else self._for_files).latest(path)
        if number < 0:
            return None
        return number not in self._negated


def _unescape_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    if stripped != line and stripped.endswith("\\"):
        return stripped[:-1] + " "  # "a\ " keeps one space (the escaped one)
    return stripped


def parse_ignore_file(text: str, base: str) -> IgnoreFile | None:
    """The rules of an ignore file's ``text`` for the directory ``base`` (real path + separator); None if none."""
    for_dirs, for_files = _Rules(), _Rules()
    negated: set[int] = set()
    for number, raw in enumerate(text.split("\n")):
        line = _unescape_trailing_spaces(raw.rstrip("\r"))
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith(("\\#", "\\!")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        pattern = line.lstrip("/")
        if negate:
            negated.add(number)
        for_dirs.add(number, pattern, anchored)
        if not dir_only:
            for_files.add(number, pattern, anchored)
    if for_dirs.empty:
        return None
    for_dirs.seal()
    for_files.seal()
    return IgnoreFile(base, for_dirs, for_files, frozenset(negated))


IgnoreChain = tuple[IgnoreFile, ...]
"""The ignore files that apply in a directory, shallowest first."""


def _read_small(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _MAX_IGNORE_FILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _with_sep(directory: str) -> str:
    return directory if directory.endswith(os.sep) else directory + os.sep


class Ignores:
    """The ignore rules of one walk of the project whose real path is ``root`` (files read once, then cached)."""

    __slots__ = ("_cache", "_top")

    def __init__(self, root: str) -> None:
        self._cache: dict[str, IgnoreFile | None] = {}
        top = root
        probe = root
        while True:
            if os.path.lexists(os.path.join(probe, ".git")):
                top = probe
                break
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        self._top = top

    def _load(self, directory: str) -> IgnoreFile | None:
        if directory not in self._cache:
            text = _read_small(os.path.join(directory, ".gitignore"))
            self._cache[directory] = None if text is None else parse_ignore_file(text, _with_sep(directory))
        return self._cache[directory]

    def chain_for(self, directory: str) -> IgnoreChain:
        """The rules that apply to the entries of ``directory`` (a real path at or below the top)."""
        chain: list[IgnoreFile] = []
        exclude = _read_small(os.path.join(self._top, ".git", "info", "exclude"))
        if exclude is not None:
            rules = parse_ignore_file(exclude, _with_sep(self._top))
            if rules is not None:
                chain.append(rules)
        if directory != self._top and not directory.startswith(_with_sep(self._top)):
            return tuple(chain)
        current = self._top
        parts = [] if directory == self._top else directory[len(_with_sep(self._top)) :].split(os.sep)
        for part in ["", *parts]:
            current = os.path.join(current, part) if part else current
            rules = self._load(current)
            if rules is not None:
                chain.append(rules)
        return tuple(chain)

    def extend(self, chain: IgnoreChain, directory: str) -> IgnoreChain:
        """``chain`` plus the rules of ``directory``'s own ``.gitignore`` (for entering a subdirectory)."""
        rules = self._load(directory)
        return chain if rules is None else (*chain, rules)

    @staticmethod
    def ignored(chain: IgnoreChain, real: str, is_dir: bool) -> bool:
        """Whether the entry at the real path ``real`` is hidden by ``chain`` (the rules of its directory)."""
        for rules in reversed(chain):
            if real.startswith(rules.base):
                decision = rules.decide(real[len(rules.base) :], is_dir)
                if decision is not None:
                    return decision
        return False
