"""Glob patterns as regular expressions, with the semantics of ``.gitignore`` (and of the ``glob`` tool).

``*`` matches any run of characters but ``/``, ``?`` one character but ``/``, ``[abc]`` / ``[a-z]`` / ``[!abc]``
a character class (never ``/``), ``\\x`` the character ``x``; a ``**`` that is a whole path segment matches any
number of segments: ``**/x`` (``x`` at any depth), ``a/**/b`` (zero or more directories between), ``a/**``
(everything inside ``a``). Any other ``**`` is a ``*``. :func:`expand_braces` adds ``{a,b}`` alternatives (the
``glob`` tool and grep's ``include``; ``.gitignore`` has none). The regexes are for ``fullmatch`` on a
``/``-separated path.
"""

from __future__ import annotations

import re

__all__ = ["MAX_BRACE_EXPANSIONS", "compile_globs", "expand_braces", "glob_regex", "has_magic"]

MAX_BRACE_EXPANSIONS = 256

_MAGIC = re.compile(r"[*?\[{\\]")


def has_magic(segment: str) -> bool:
    """Whether a path segment is a pattern rather than a literal name."""
    return _MAGIC.search(segment) is not None


def _char_class(pattern: str, start: int) -> tuple[str, int] | None:
    """The regex of the class opening at ``pattern[start] == "["`` and the index after it; None when unclosed."""
    end = start + 1
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    while end < len(pattern) and pattern[end] != "]":
        end += 1
    if end >= len(pattern):
        return None
    body = pattern[start + 1 : end]
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    chars = "".join("-" if char == "-" else re.escape(char) for char in body)
    return ("[^/" + chars + "]" if negated else "[" + chars + "]"), end + 1


def glob_regex(pattern: str) -> str:
    """The regex source (for ``fullmatch``) of one glob ``pattern`` without braces."""
    out: list[str] = []
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char == "*":
            end = index
            while end < size and pattern[end] == "*":
                end += 1
            whole_segment = (index == 0 or pattern[index - 1] == "/") and (end == size or pattern[end] == "/")
            if end - index >= 2 and whole_segment:
                if end == size:
                    out.append(".*")
                else:
                    out.append("(?:.*/)?")
                    end += 1  # the "/" after "**" belongs to it
            else:
                out.append("[^/]*")
            index = end
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            found = _char_class(pattern, index)
            if found is not None:
                out.append(found[0])
                index = found[1]
                continue
            out.append(re.escape(char))
        elif char == "\\" and index + 1 < size:
            out.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


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


def compile_globs(patterns: list[str]) -> re.Pattern[str]:
    """One regex matching (``fullmatch``) a path that any of ``patterns`` matches."""
    return re.compile("|".join(f"(?:{glob_regex(pattern)})" for pattern in patterns), re.DOTALL)
