"""Glob patterns with the semantics of ``.gitignore`` (and of the ``glob`` tool), matched without backtracking.

``*`` matches any run of characters but ``/``, ``?`` one character but ``/``, ``[abc]`` / ``[a-z]`` / ``[!abc]``
a character class (never ``/``: a ``[`` closed only after a ``/`` is a literal ``[``), ``\\x`` the character
``x`` (``\\/`` is a ``/``); a ``**`` that is a whole path segment matches any number of segments: ``**/x`` (``x``
at any depth), ``a/**/b`` (zero or more directories between), ``a/**`` (everything inside ``a``). Any other
``**`` is a ``*``. :func:`expand_braces` adds ``{a,b}`` alternatives (the
``glob`` tool and grep's ``include``; ``.gitignore`` has none). A :class:`Glob` matches a whole ``/``-separated
path.

The invariant: matching takes time polynomial in the sizes, never exponential, whatever the pattern. Within a
segment the pieces between ``*`` are placed leftmost, one after the other (no backtracking is needed: a later
piece can only gain from an earlier one placed sooner), so a segment costs at most ``len(name) * len(pattern)``
character tests (literal pieces use ``str.find``); ``**`` are matched by dynamic programming over the segments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MAX_BRACE_EXPANSIONS", "Glob", "GlobSet", "Segment", "expand_braces", "has_magic"]

MAX_BRACE_EXPANSIONS = 256

_MAGIC = re.compile(r"[*?\[{\\]")


def has_magic(segment: str) -> bool:
    """Whether a path segment is a pattern rather than a literal name."""
    return _MAGIC.search(segment) is not None


@dataclass(frozen=True, slots=True)
class _Class:
    """A character class: ``chars`` and inclusive ``ranges``, or any other character when ``negated``."""

    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def test(self, char: str) -> bool:
        found = char in self.chars or any(low <= char <= high for low, high in self.ranges)
        return found != self.negated


_Test = str | _Class | None
"""One character of a piece: that literal character, a class, or (None) any character (``?``)."""

_Piece = str | tuple[_Test, ...]
"""A run of a segment between ``*``: a literal string, or one test per character."""


def _piece_at(piece: _Piece, name: str, position: int) -> bool:
    if isinstance(piece, str):
        return name.startswith(piece, position)
    for offset, test in enumerate(piece):
        char = name[position + offset]
        if test is None:
            continue
        if isinstance(test, str):
            if char != test:
                return False
        elif not test.test(char):
            return False
    return True


def _piece_find(piece: _Piece, name: str, start: int, end: int) -> int:
    """The first position ``>= start`` where ``piece`` matches and ends by ``end``; -1 when none."""
    if isinstance(piece, str):
        return name.find(piece, start, end)
    for position in range(start, end - len(piece) + 1):
        if _piece_at(piece, name, position):
            return position
    return -1


def _parse_class(segment: str, start: int) -> tuple[_Class, int] | None:
    """The class opening at ``segment[start] == "["`` and the index after it; None when unclosed."""
    end = start + 1
    if end < len(segment) and segment[end] in "!^":
        end += 1
    if end < len(segment) and segment[end] == "]":
        end += 1
    while end < len(segment) and segment[end] != "]":
        end += 1
    if end >= len(segment):
        return None
    body = segment[start + 1 : end]
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    index = 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            ranges.append((body[index], body[index + 2]))  # a reversed range matches nothing
            index += 3
        else:
            chars.add(body[index])
            index += 1
    return _Class(frozenset(chars), tuple(ranges), negated), end + 1


def _as_piece(tests: list[_Test]) -> _Piece:
    if all(isinstance(test, str) for test in tests):
        return "".join(test for test in tests if isinstance(test, str))
    return tuple(tests)


class Segment:
    """One path segment of a pattern (no ``/``, not a ``**``): ``pieces`` separated by ``*`` when ``starred``,
    else a single piece the whole name must match."""

    __slots__ = ("_ends", "pieces", "starred")

    def __init__(self, pieces: tuple[_Piece, ...], starred: bool) -> None:
        self.pieces = pieces
        self.starred = starred
        head, tail = pieces[0], pieces[-1]
        plain = len(pieces) == 2 and isinstance(head, str) and isinstance(tail, str)
        self._ends = (head, tail) if plain and isinstance(head, str) and isinstance(tail, str) else None

    @classmethod
    def parse(cls, segment: str) -> Segment:
        pieces: list[_Piece] = []
        tests: list[_Test] = []
        starred = False
        index, size = 0, len(segment)
        while index < size:
            char = segment[index]
            if char == "*":
                pieces.append(_as_piece(tests))
                tests = []
                starred = True
                while index < size and segment[index] == "*":
                    index += 1
                continue
            if char == "?":
                tests.append(None)
            elif char == "[":
                found = _parse_class(segment, index)
                if found is not None:
                    tests.append(found[0])
                    index = found[1]
                    continue
                tests.append(char)
            elif char == "\\" and index + 1 < size:
                tests.append(segment[index + 1])
                index += 2
                continue
            else:
                tests.append(char)
            index += 1
        pieces.append(_as_piece(tests))
        return cls(tuple(pieces), starred)

    @property
    def literal(self) -> str | None:
        """The name this segment matches when it matches only one, else None."""
        piece = self.pieces[0]
        return piece if not self.starred and isinstance(piece, str) else None

    @property
    def literal_ends(self) -> tuple[str, str] | None:
        """``(prefix, suffix)`` when the segment is ``prefix*suffix`` with both literal, else None."""
        return self._ends

    def match(self, name: str) -> bool:
        """Whether the whole of ``name`` (one path segment) matches."""
        ends = self._ends
        if ends is not None:  # the usual "*.py", "test_*": no scan
            head, tail = ends
            return len(name) >= len(head) + len(tail) and name.startswith(head) and name.endswith(tail)
        pieces = self.pieces
        if not self.starred:
            piece = pieces[0]
            if isinstance(piece, str):
                return name == piece
            return len(name) == len(piece) and _piece_at(piece, name, 0)
        first, last = pieces[0], pieces[-1]
        end = len(name) - len(last)
        if end < len(first) or not _piece_at(first, name, 0) or not _piece_at(last, name, end):
            return False
        position = len(first)
        for piece in pieces[1:-1]:
            found = _piece_find(piece, name, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True


_DEEP = None
"""A ``**`` segment among a :class:`Glob`'s parts."""


def _is_deep(segment: str) -> bool:
    return len(segment) >= 2 and segment.count("*") == len(segment)


def _split_segments(pattern: str) -> list[str]:
    """``pattern`` split at each ``/``, an escaped one (``\\/``) included; escapes are kept in the segments."""
    if "\\/" not in pattern:
        return pattern.split("/")
    segments: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            if pattern[index + 1] == "/":
                segments.append("".join(current))
                current = []
            else:
                current.append(pattern[index : index + 2])
            index += 2
            continue
        if char == "/":
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    segments.append("".join(current))
    return segments


class Glob:
    """One glob pattern (no braces), for whole ``/``-separated paths. A ``**`` matches zero or more segments, or
    one or more when it ends the pattern (``a/**`` is what is inside ``a``, not ``a`` itself)."""

    __slots__ = ("_deep", "_head", "_parts", "_tail", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        parts: list[Segment | None] = []
        for segment in _split_segments(pattern):
            if _is_deep(segment):
                if parts and parts[-1] is _DEEP:
                    continue  # "**/**" is one "**"
                parts.append(_DEEP)
            else:
                parts.append(Segment.parse(segment))
        self._parts = tuple(parts)
        deep = [index for index, part in enumerate(parts) if part is None]
        self._deep = len(deep)
        # with one "**": the segments before it and after it (no "**" among them)
        self._head = tuple(part for part in parts[: deep[0]] if part is not None) if deep else ()
        self._tail = tuple(part for part in parts[deep[0] + 1 :] if part is not None) if deep else ()

    @property
    def segments(self) -> tuple[Segment | None, ...]:
        """The pattern's segments, None for a ``**``."""
        return self._parts

    def match(self, path: str) -> bool:
        """Whether the whole of ``path`` matches."""
        if self._deep == 0:
            parts = self._parts
            if len(parts) == 1:
                part = parts[0]
                return part is not None and "/" not in path and part.match(path)
            names = path.split("/")
            return len(names) == len(parts) and all(
                part is not None and part.match(name) for part, name in zip(parts, names, strict=True)
            )
        if self._deep == 1:
            head, tail = self._head, self._tail
            if not head and len(tail) == 1:  # "**/name"
                return tail[0].match(path[path.rfind("/") + 1 :])
            names = path.split("/")
            count = len(names)
            if count < len(head) + max(len(tail), 1):  # a final "**" is at least one segment
                return False
            for index, part in enumerate(head):
                if not part.match(names[index]):
                    return False
            skip = count - len(tail)
            return all(part.match(names[skip + index]) for index, part in enumerate(tail))
        return self._match_deep(path.split("/"))

    def _match_deep(self, names: list[str]) -> bool:
        """The general case, several ``**``: the segment indexes reachable after each part, in order."""
        parts = self._parts
        count = len(names)
        reached = [0]
        last = len(parts) - 1
        for index, part in enumerate(parts):
            if part is None:
                if index == last:
                    return reached[0] < count
                reached = list(range(reached[0], count + 1))
                continue
            reached = [at + 1 for at in reached if at < count and part.match(names[at])]
            if not reached:
                return False
        return reached[-1] == count


class GlobSet:
    """Paths matching any of ``patterns``."""

    __slots__ = ("_globs",)

    def __init__(self, patterns: Iterable[str]) -> None:
        self._globs = tuple(Glob(pattern) for pattern in patterns)

    def match(self, path: str) -> bool:
        return any(glob.match(path) for glob in self._globs)


def _split_top_level(body: str) -> list[str]:
    parts: list[str] = []
    depth, start, index = 0, 0, 0
    while index < len(body):
        char = body[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:index])
            start = index + 1
        index += 1
    parts.append(body[start:])
    return parts


def expand_braces(pattern: str) -> list[str]:
    """``pattern`` with its ``{a,b}`` alternatives expanded (nested ones too; a brace without a comma, or
    unclosed, is literal). More than :data:`MAX_BRACE_EXPANSIONS` results raise ``ValueError``."""
    depth, start, index = 0, -1, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _split_top_level(pattern[start + 1 : index])
                if len(options) > 1:
                    head, tail = pattern[:start], pattern[index + 1 :]
                    out: list[str] = []
                    for option in options:
                        out += expand_braces(head + option + tail)
                        if len(out) > MAX_BRACE_EXPANSIONS:
                            raise ValueError(f"the pattern expands to more than {MAX_BRACE_EXPANSIONS} alternatives")
                    return out
        index += 1
    return [pattern]
