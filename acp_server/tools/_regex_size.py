"""How big a regular expression gets once compiled, estimated from its text before the ``regex`` module sees it.

The ``regex`` module compiles a counted repetition by repeating its body (``(?:a{1000}){1000}`` becomes a million
items: seconds of compiling with the GIL held, or a MemoryError). :func:`unrolled_size` is an upper estimate of
that size, from the text alone: every character, escape, class or group counts one item (a group, the sum of
its items), and ``{m}``, ``{m,}``, ``{m,n}`` multiply what they repeat by ``m``. It over-counts a little (flags,
group names), never under-counts a repetition.
"""

from __future__ import annotations

import re

__all__ = ["unrolled_size"]

_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_ESCAPES_WITH_BRACES = frozenset("pPNxuUgk")
_HUGE = 10**12


def _skip_class(pattern: str, index: int) -> int:
    """The index after the character class opening at ``pattern[index] == "["`` (nested ``[`` included)."""
    size = len(pattern)
    index += 1
    if index < size and pattern[index] == "^":
        index += 1
    if index < size and pattern[index] == "]":
        index += 1
    depth = 1
    while index < size:
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return size


def unrolled_size(pattern: str) -> int:
    """The estimated number of items ``pattern`` compiles to (its length when it has no counted repetition)."""
    # per open group: [the size of its items so far, the size of its last item]
    stack: list[list[int]] = [[0, 0]]
    index, size = 0, len(pattern)

    def item(weight: int) -> None:
        top = stack[-1]
        top[0] += weight
        top[1] = weight

    while index < size:
        char = pattern[index]
        if char == "\\":
            end = index + 2
            if index + 1 < size and pattern[index + 1] in _ESCAPES_WITH_BRACES and pattern[end : end + 1] == "{":
                close = pattern.find("}", end)
                end = size if close < 0 else close + 1
            item(1)
            index = end
        elif char == "[":
            item(1)
            index = _skip_class(pattern, index)
        elif char == "(":
            stack.append([0, 0])
            index += 1
        elif char == ")" and len(stack) > 1:
            total = stack.pop()[0]
            item(max(total, 1))
            index += 1
        elif char == "{" and (count := _COUNT.match(pattern, index)) is not None:
            digits = count.group(1)
            times = 0 if not digits else _HUGE if len(digits) > 12 else int(digits)
            top = stack[-1]
            if times > 1:
                top[0] = min(top[0] + top[1] * (times - 1), _HUGE)
                top[1] = min(top[1] * times, _HUGE)
            index = count.end()
        else:
            item(1)
            index += 1
    while len(stack) > 1:  # unclosed groups (the compiler will refuse the pattern anyway)
        total = stack.pop()[0]
        item(max(total, 1))
    return stack[0][0]
