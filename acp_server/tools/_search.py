"""What the search tools (``builtin/glob``: paths matching a pattern; ``builtin/grep``: lines matching a regular
expression) do.

Both walk the project with :class:`~._walk.Walk` (``.git`` and what ``.gitignore`` hides skipped, symbolic links
never entered) in a worker thread, so a big project does not stall the event loop; cancelling the call stops the
walk. Output is capped: :data:`MAX_GLOB_PATHS` paths, :data:`MAX_GREP_MATCHES` lines, 64 KiB, each with a note.

Globs are matched without backtracking (:mod:`._globs`). grep's pattern is a Python regular expression run by the
``regex`` module (its default syntax is ``re``'s), which releases the GIL while it matches (a slow pattern never
stalls the event loop) and is given :data:`GREP_TIME_BUDGET_S` of matching per call: a pattern that backtracks
for longer stops the search there, and the call returns the matches found so far with a note saying so. Lines
longer than :data:`MAX_GREP_SCAN_CHARS` are matched in their first :data:`MAX_GREP_SCAN_CHARS` characters only
(a note says how many). A cancelled grep returns at once; its thread ends within the time budget. A pattern that
would be slow to compile (compiling holds the GIL) is refused: over :data:`MAX_GREP_PATTERN_CHARS` characters,
or counted repetitions unrolling past :data:`MAX_GREP_PATTERN_ITEMS` items.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..domain import TextContent
from ._exceptions import ToolCallError
from ._globs import GlobSet, expand_braces, has_magic
from ._output import OUTPUT_LIMIT_BYTES, clip_line, join_lines, plural, utf8_len
from ._regex_size import unrolled_size
from ._textfile import MAX_TEXT_FILE_BYTES, read_searchable
from ._types import ToolResult
from ._walk import MAX_WALK_ENTRIES, Walk
from ._workspace import Target, Workspace

if TYPE_CHECKING:
    import regex  # imported by the first grep (compile_pattern): an agent that never greps never loads it

__all__ = [
    "GREP_TIME_BUDGET_S",
    "MAX_GLOB_PATHS",
    "MAX_GREP_LINE_CHARS",
    "MAX_GREP_MATCHES",
    "MAX_GREP_PATTERN_CHARS",
    "MAX_GREP_PATTERN_ITEMS",
    "MAX_GREP_SCAN_CHARS",
    "clip_title",
    "compile_pattern",
    "glob_plan",
    "glob_work",
    "grep_work",
]

MAX_GLOB_PATHS = 1000
MAX_GREP_MATCHES = 500
MAX_GREP_LINE_CHARS = 500
MAX_GREP_SCAN_CHARS = 64 * 1024
"""A longer line is matched in its first this many characters only."""
GREP_TIME_BUDGET_S = 5.0
"""The matching time one grep call may use (the walk and the reads are not counted)."""
MAX_GREP_PATTERN_CHARS = 8192
MAX_GREP_PATTERN_ITEMS = 100_000
"""The most a pattern may unroll to (:func:`~._regex_size.unrolled_size`): compiling it takes at most ~50 ms."""


def _walk_note(walk: Walk) -> str:
    return f"[the search stopped after {MAX_WALK_ENTRIES} entries; narrow it to a directory]" if walk.truncated else ""


def clip_title(text: str, size: int = 60) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= size else text[: size - 1] + "…"


# --- glob ---------------------------------------------------------------------------------------------------


def _relative_pattern(workspace: Workspace, pattern: str) -> tuple[str, str]:
    """The directory a pattern is relative to (the project directory's path, or an additional directory's when an
    absolute pattern starts there) and the pattern relative to it."""
    if "\0" in pattern:
        raise ToolCallError(f"pattern {pattern!r} contains a NUL byte")
    if not os.path.isabs(pattern):
        return workspace.cwd, pattern
    for root in workspace.roots:
        for prefix in (root.shown, root.real):
            if pattern == prefix:
                return root.shown, "."
            if pattern.startswith(prefix.rstrip("/") + "/"):
                return root.shown, pattern[len(prefix.rstrip("/")) + 1 :]
    where = "the project directory" if not workspace.extra else "the project directory and the additional directories"
    raise ToolCallError(
        f"pattern '{pattern}' is outside {where} {workspace.cwd}; give it relative to that directory"
        if not workspace.extra
        else f"pattern '{pattern}' is outside {where}; give it relative to the project directory {workspace.cwd}, "
        "or absolute inside an additional directory"
    )


def glob_plan(workspace: Workspace, pattern: str) -> tuple[Target, str, GlobSet, int | None, str]:
    """Where to walk (the literal directories the pattern starts with), the label of the walked paths (relative to
    the root the pattern is in), the regex of the whole pattern, and how deep to walk (None: ``**`` goes all the way
    down), and what prefixes the paths found. A relative pattern is in the project directory (paths found are
    relative to it); an absolute one in the root it starts with (in an additional directory, paths found are
    absolute)."""
    top, relative = _relative_pattern(workspace, pattern)
    try:
        expanded = expand_braces(relative)
    except ValueError as exc:
        raise ToolCallError(f"pattern '{pattern}': {exc}") from None
    split: list[list[str]] = []
    for option in expanded:
        segments = [segment for segment in option.split("/") if segment not in ("", ".")]
        if ".." in segments:
            raise ToolCallError(
                f"pattern '{pattern}' contains '..'; glob patterns are relative to the project directory and stay "
                "inside it"
            )
        if not segments:
            raise ToolCallError(f"pattern '{pattern}' matches nothing but the project directory itself")
        split.append(segments)
    base: list[str] = []
    for column in zip(*(segments[:-1] for segments in split), strict=False):
        if len(set(column)) != 1 or has_magic(column[0]):
            break
        base.append(column[0])
    within = "/".join(base) or "."
    target = workspace.resolve(within if top == workspace.cwd else os.path.join(top, within), "pattern")
    globs = GlobSet("/".join(segments) for segments in split)
    deep = any("**" in segment for segments in split for segment in segments)
    depth = None if deep else max(len(segments) for segments in split) - len(base)
    spelled = "" if top == workspace.cwd else top.rstrip("/") + "/"
    return target, "".join(part + "/" for part in base), globs, depth, spelled


def glob_work(
    workspace: Workspace, pattern: str, base: Target, label: str, globs: GlobSet, depth: int | None, spelled: str
) -> Callable[[threading.Event], ToolResult]:
    def work(stop: threading.Event) -> ToolResult:
        found: list[str] = []
        walk = Walk(base.root, base.real, label, stop=stop, max_depth=depth)
        if os.path.isdir(base.real):
            for entry in walk:
                if not globs.match(entry.rel):
                    continue
                if entry.is_link:
                    real = os.path.realpath(entry.real)
                    if not workspace.contains(real):
                        continue  # a link out of the roots: not a file of the workspace
                    found.append(spelled + entry.rel + "/" if os.path.isdir(real) else spelled + entry.rel)
                else:
                    found.append(spelled + entry.rel + "/" if entry.is_dir else spelled + entry.rel)
        found.sort()
        text, shown = join_lines(found[:MAX_GLOB_PATHS])
        notes = [_walk_note(walk)]
        if shown < len(found):
            notes.append(f"[{shown} of {len(found)} paths shown; narrow the pattern]")
        if not found:
            text = f"no path matches '{pattern}'\n"
        output = (text + "\n".join(note for note in notes if note)).rstrip("\n")
        summary = f"{len(found)} path{'' if len(found) == 1 else 's'}"
        return ToolResult(output, (TextContent(summary),), {"paths": len(found), "truncated": shown < len(found)})

    return work


# --- grep ---------------------------------------------------------------------------------------------------


def _clip_long_lines(text: str) -> tuple[str, int]:
    """``text`` with each line cut to :data:`MAX_GREP_SCAN_CHARS` characters, and how many were cut."""
    if len(text) <= MAX_GREP_SCAN_CHARS:
        return text, 0
    lines = text.split("\n")
    if max(map(len, lines)) <= MAX_GREP_SCAN_CHARS:
        return text, 0
    cut = sum(1 for line in lines if len(line) > MAX_GREP_SCAN_CHARS)
    return "\n".join(line[:MAX_GREP_SCAN_CHARS] for line in lines), cut


class _Matches:
    """The matching lines found so far, within the caps and the matching time budget."""

    def __init__(self, stop: threading.Event) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.files = 0
        self.capped = False
        self.skipped: dict[str, int] = {}
        self.long_lines = 0
        self.timed_out_in: str | None = None
        self._stop = stop
        self._budget = GREP_TIME_BUDGET_S

    def _search(self, pattern: regex.Pattern[str], text: str, position: int = 0) -> regex.Match[str] | None:
        """``pattern.search`` within what is left of the time budget (TimeoutError once it is spent)."""
        if self._budget <= 0:
            raise TimeoutError
        started = time.monotonic()
        try:
            return pattern.search(text, position, concurrent=True, timeout=self._budget)
        finally:
            self._budget -= time.monotonic() - started

    def search(self, text: str, rel: str, line_regex: regex.Pattern[str], text_regex: regex.Pattern[str]) -> bool:
        """Add the lines of ``text`` (the file ``rel``) that match; False once a cap, the time budget or a
        cancellation stops the search."""
        text, cut = _clip_long_lines(text)
        self.long_lines += cut
        position, number, counted_to = 0, 1, 0
        found = False
        try:
            while position <= len(text):
                if self._stop.is_set():
                    return False
                match = self._search(text_regex, text, position)
                if match is None:
                    break
                start = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.start())
                end = len(text) if end < 0 else end
                number += text.count("\n", counted_to, start)
                counted_to = start
                line = text[start:end]
                if self._search(line_regex, line):
                    entry = f"{rel}:{number}:{clip_line(line.removesuffix(chr(13)), MAX_GREP_LINE_CHARS)}"
                    size = utf8_len(entry) + 1
                    if len(self.lines) >= MAX_GREP_MATCHES or self.size + size > OUTPUT_LIMIT_BYTES - 400:
                        self.capped = True
                        return False
                    self.lines.append(entry)
                    self.size += size
                    found = True
                position = end + 1
        except TimeoutError:
            self.timed_out_in = rel
            return False
        finally:
            self.files += found
        return True


def grep_work(
    workspace: Workspace,
    target: Target,
    is_dir: bool,
    line_regex: regex.Pattern[str],
    text_regex: regex.Pattern[str],
    include: tuple[GlobSet, bool] | None,
    where: str,
) -> Callable[[threading.Event], ToolResult]:
    def work(stop: threading.Event) -> ToolResult:
        matches = _Matches(stop)
        note = ""
        if not is_dir:
            text, why = read_searchable(target.real)
            if text is None:
                note = f"[{target.rel} was not searched: {_WHY[why]}]"
            else:
                matches.search(text, target.rel, line_regex, text_regex)
        else:
            inner = target.inner
            spelled = target.label  # paths in an additional directory are given absolute
            walk = Walk(target.root, target.real, "" if inner == "." else inner + "/", stop=stop)
            for entry in walk:
                if entry.is_dir or entry.is_link:
                    continue
                if include is not None and not include[0].match(entry.rel if include[1] else entry.name):
                    continue  # an include with a / matches the path relative to the root searched
                rel = spelled + entry.rel
                text, why = read_searchable(entry.real)
                if text is None:
                    matches.skipped[why] = matches.skipped.get(why, 0) + 1
                    continue
                if not matches.search(text, rel, line_regex, text_regex):
                    break
            note = _walk_note(walk)
        notes = [note]
        if matches.timed_out_in is not None:
            notes.append(
                f"[grep stopped after {GREP_TIME_BUDGET_S:g} s of matching, in {matches.timed_out_in}: the regular "
                "expression is too slow there (it backtracks: nested repetition like (a+)+, or several .* on long "
                "lines); the matches above are incomplete: simplify the pattern, or narrow path or include]"
            )
        if matches.capped:
            notes.append(f"[output capped at {len(matches.lines)} matching lines; narrow the pattern, path or include]")
        if matches.long_lines:
            notes.append(
                f"[{plural(matches.long_lines, 'line')} longer than {MAX_GREP_SCAN_CHARS // 1024} KiB "
                f"{'was' if matches.long_lines == 1 else 'were'} searched in the first "
                f"{MAX_GREP_SCAN_CHARS // 1024} KiB only]"
            )
        if matches.skipped.get("large"):
            notes.append(f"[{matches.skipped['large']} file(s) over {MAX_TEXT_FILE_BYTES // 1024 // 1024} MiB skipped]")
        text = "".join(line + "\n" for line in matches.lines) or f"no matches{where}\n"
        output = (text + "\n".join(n for n in notes if n)).rstrip("\n")
        count = len(matches.lines)
        summary = f"{plural(count, 'matching line')} in {plural(matches.files, 'file')}"
        if matches.timed_out_in is not None:
            summary += " (stopped: the pattern is too slow)"
        timed_out = matches.timed_out_in is not None
        raw = {"matches": count, "files": matches.files, "truncated": matches.capped or timed_out}
        if timed_out:
            raw["timedOut"] = True
        return ToolResult(output, (TextContent(summary),), raw)

    return work


_WHY = {
    "binary": "it is a binary file",
    "large": f"it is over {MAX_TEXT_FILE_BYTES // 1024 // 1024} MiB",
    "unreadable": "it cannot be read",
}


def compile_pattern(pattern: str) -> tuple[regex.Pattern[str], regex.Pattern[str]]:
    """The pattern for one line and the one for a whole text (``MULTILINE``); refused when invalid or when it
    would take long to compile (compiling holds the GIL: the event loop would stall)."""
    if len(pattern) > MAX_GREP_PATTERN_CHARS:
        raise ToolCallError(
            f"pattern is {len(pattern)} characters long, more than {MAX_GREP_PATTERN_CHARS}; search for a shorter, "
            "distinctive part of the text"
        )
    size = unrolled_size(pattern)
    if size > MAX_GREP_PATTERN_ITEMS:
        raise ToolCallError(
            f"pattern repeats too much: its counted repetitions ({{n}}) make it about {size} items once "
            f"compiled, more than {MAX_GREP_PATTERN_ITEMS}; use smaller counts, or + and * instead"
        )
    import regex

    try:
        return regex.compile(pattern), regex.compile(pattern, regex.MULTILINE)
    except (regex.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        raise ToolCallError(f"invalid regular expression {pattern!r}: {exc}") from None
