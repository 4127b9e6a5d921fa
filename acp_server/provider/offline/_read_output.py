"""What a ``read_file`` tool result says about the file: its first line and line count, or the failure (pure).

The agent's output format is not fixed, so this reads it leniently: lines raw or numbered (``     1\\t# title``
as ``cat -n`` prints them, or ``1→``, ``1:``, ``1 |``), optionally a note before or after them that gives the
total (``(42 lines)``, ``[showing lines 1-20 of 42]``) or what was left out (``... 22 more lines``). A result
that starts like an error (or is a JSON ``{"error": …}``) is a failure; ``(empty file)`` is no line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_FAILURE = re.compile(
    r"(?:error|failed|failure|refused|denied|cannot|can't|could not|unable|no such file|not found|"
    r"permission denied|the user declined|binary file|tool (?:error|failed)|"
    r"(?:file|path|directory) (?:not found|does not exist|is outside|is not|is a directory|is binary))\b",
    re.IGNORECASE,
)
_EMPTY = re.compile(r"\W*(?:the\s+)?(?:file\s+is\s+)?empty(?:\s+file)?\W*", re.IGNORECASE)
_NUMBERED = re.compile(r"\s*(\d+)(?:(\t|→|:\s?|\s*\|\s?)(.*))?")
_NOTE = re.compile(
    r"\s*(?:[\[(<]|\.\.\.|…|-{2,}|(?:note|showing|shown|truncated|total|lines|file)\b).*\blines?\b",
    re.IGNORECASE,
)
_NUMBER = r"(\d[\d,]*)"
_TOTALS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"\bof\s+{_NUMBER}\b",
        rf"\b{_NUMBER}\s+lines?\s+(?:total|in\s+total)\b",
        rf"\btotal(?:\s+of)?\s*[:=]?\s*{_NUMBER}",
        rf"\b(?:has|contains|with)\s+{_NUMBER}\s+lines?\b",
        rf"^\W*{_NUMBER}\s+lines?\W*$",
        rf"\({_NUMBER}\s+lines?\b",
    )
)
_MORE = re.compile(rf"\b{_NUMBER}\s+more\s+lines?\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FileLines:
    """The file was read: ``first_line`` (None when no line came back) and ``line_count``, the file's total
    when the output states it, else the number of lines returned."""

    first_line: str | None
    line_count: int


@dataclass(frozen=True, slots=True)
class ReadFailure:
    """The tool said it could not read the file; ``message`` is what it said (whitespace collapsed)."""

    message: str


def _failure(content: str) -> ReadFailure | None:
    text = content.strip()
    message: object = text
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or "error" not in parsed:
            return None
        message = parsed["error"]
        message = message.get("message", message) if isinstance(message, dict) else message
    elif not _FAILURE.match(text):
        return None
    return ReadFailure(" ".join(str(message).split()))


def _count(match: re.Match[str]) -> int:
    return int(match.group(1).replace(",", ""))


def _total(note: str) -> int | None:
    """The file's line count a note states: ``of 42``, ``(42 lines)``, ``42 lines total`` ...; None if none."""
    for pattern in _TOTALS:
        if match := pattern.search(note):
            return _count(match)
    return None


def _strip_numbers(lines: list[str]) -> list[str] | None:
    """The lines without their numbers, if every line is numbered consecutively (else None: raw lines)."""
    matches = [_NUMBERED.fullmatch(line) for line in lines]
    if not lines or any(m is None for m in matches):
        return None
    numbers = [int(m.group(1)) for m in matches if m is not None]
    consecutive = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    if not consecutive or all(m.group(2) is None for m in matches if m is not None):
        return None
    return [m.group(3) or "" for m in matches if m is not None]


def parse_read_output(content: str) -> FileLines | ReadFailure:
    """Read ``content``, a ``read_file`` tool result. Leading and trailing notes (lines that mention "lines"
    and start with a bracket, an ellipsis or a word such as "showing") are not lines of the file."""
    if (failure := _failure(content)) is not None:
        return failure
    if _EMPTY.fullmatch(content):
        return FileLines(None, 0)
    lines = content.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    notes: list[str] = []
    for end in (-1, 0):  # a trailing note, then a leading one; blank lines around a note go with it
        probe = [i for i, line in enumerate(lines) if line.strip()]
        if probe and _NOTE.match(note := lines[probe[end]]):
            notes.append(note)
            lines = lines[: probe[end]] if end == -1 else lines[probe[0] + 1 :]
            while lines and not lines[end].strip():
                lines.pop(end)
    lines = _strip_numbers(lines) or lines
    first = lines[0].rstrip() if lines else None
    totals = [total for note in notes if (total := _total(note)) is not None]
    more = [_count(match) for note in notes if (match := _MORE.search(note))]
    return FileLines(first, totals[0] if totals else len(lines) + sum(more))
