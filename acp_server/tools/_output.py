"""The cap on what a tool call gives back to the model: 64 KiB of UTF-8 per call, cut on a character boundary.

Every cut says so: the text ends with a note naming what was left out and how to see more.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["OUTPUT_LIMIT_BYTES", "cap_text", "clip_line", "join_lines", "number_lines", "plural", "utf8_len"]

OUTPUT_LIMIT_BYTES = 64 * 1024
"""The most a tool call gives the model (the note of a cut included)."""

_NOTE_ROOM = 400  # bytes kept free for the note a tool appends after a cut


def utf8_len(text: str) -> int:
    """The UTF-8 size of ``text`` (no encoding for ASCII text)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _cut(text: str, limit: int) -> str:
    """The longest prefix of ``text`` of at most ``limit`` UTF-8 bytes."""
    if len(text) <= limit // 4 or (text.isascii() and len(text) <= limit):
        return text
    if text.isascii():
        return text[:limit]
    return text.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")


def cap_text(text: str, note: str, limit: int = OUTPUT_LIMIT_BYTES) -> str:
    """``text`` as is when it fits in ``limit`` bytes, else cut and followed by ``[output truncated at
    <limit>: <note>]`` (the whole within ``limit``)."""
    if len(text) <= limit // 4 or utf8_len(text) <= limit:
        return text
    marker = f"\n[output truncated at {limit // 1024} KiB: {note}]"
    return _cut(text, limit - utf8_len(marker)) + marker


def clip_line(line: str, max_chars: int) -> str:
    """``line`` cut to ``max_chars`` characters, an ellipsis marking the cut."""
    return line if len(line) <= max_chars else line[:max_chars] + "…"


def number_lines(
    lines: Iterable[str], first: int, limit: int = OUTPUT_LIMIT_BYTES - _NOTE_ROOM
) -> tuple[str, int, bool]:
    """``lines`` numbered like ``cat -n`` (number right-aligned on 6 columns, a tab, the line; a final ``\r``
    dropped), the first one numbered ``first``, as many as fit in ``limit`` bytes. Returns the text, how many
    lines it holds, and whether the last of them was cut (a first line too long to fit alone)."""
    parts: list[str] = []
    used = 0
    for index, line in enumerate(lines):
        if line.endswith("\r"):
            line = line[:-1]
        entry = f"{first + index:6}\t{line}\n"
        size = utf8_len(entry)
        if used + size > limit:
            if not parts:
                return _cut(entry, limit - 1) + "\n", 1, True
            break
        parts.append(entry)
        used += size
    return "".join(parts), len(parts), False


def join_lines(lines: Iterable[str], limit: int = OUTPUT_LIMIT_BYTES - _NOTE_ROOM) -> tuple[str, int]:
    """As many of ``lines`` as fit in ``limit`` bytes, each newline-ended; returns the text and how many."""
    parts: list[str] = []
    used = 0
    for line in lines:
        size = utf8_len(line) + 1
        if used + size > limit:
            break
        parts.append(line)
        used += size
    return "".join(line + "\n" for line in parts), len(parts)


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``1 file``, ``2 files`` (``many`` for an irregular plural)."""
    return f"{count} {singular if count == 1 else (many or singular + 's')}"
