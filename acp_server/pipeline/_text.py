"""Model text made safe to pass on: UTF-16 surrogate halves joined across chunks, lone halves replaced.

A model (or its gateway) may split a character outside the BMP into two JSON escapes in consecutive chunks
(``"\\ud83d"`` then ``"\\ude00"``); ``json.loads`` turns each into a lone surrogate, which no UTF-8 encoder
accepts. :class:`TextJoiner` holds a trailing high half back until the next piece of the same channel arrives.

Invariant: nothing :func:`clean_text` or a :class:`TextJoiner` returns contains a lone surrogate; a pair joins
into its character, any other half becomes U+FFFD. Never raises.
"""

from __future__ import annotations

import re

__all__ = ["REPLACEMENT", "TextJoiner", "clean_text"]

REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def clean_text(text: str) -> str:
    """``text`` with surrogate pairs joined into their characters and lone halves replaced by U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class TextJoiner:
    """One channel of streamed text (answer, or reasoning): ``push`` each piece, ``flush`` at the end.

    A piece ending in a high surrogate keeps that half back; the next piece may complete the pair. ``flush``
    gives what is still held as U+FFFD (a half whose other half never came).
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def push(self, text: str) -> str:
        """The part of ``held + text`` that is safe to pass on now (possibly ``""``)."""
        if self._held:
            text, self._held = self._held + text, ""
        if text.isascii() or _SURROGATE.search(text) is None:
            return text
        if _is_high(text[-1]):
            text, self._held = text[:-1], text[-1]
        return clean_text(text)

    def flush(self) -> str:
        """U+FFFD for a held half, else ``""``; the joiner is empty afterwards."""
        held, self._held = self._held, ""
        return REPLACEMENT if held else ""
