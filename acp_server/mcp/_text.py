"""A server's metadata as the user sees it: one line of plain text, bounded.

Whatever a server names or describes (a tool's title, a prompt's description, an argument's name) is shown by the
editor; none of it may draw anything but plain text: terminal escape sequences, controls, invisible format characters
(bidi overrides, zero-width characters) and line breaks become spaces, so no title can fake another entry, colour a
terminal or reorder what is shown.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["one_line"]

_UNSHOWN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, invisible formatting (bidi overrides), line breaks
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x9b[0-?]*[ -/]*[@-~]|\x1b[@-_]")
"""A CSI sequence (ESC ``[`` or C1 CSI), an OSC one (to BEL or ST), or a two-character escape."""


def one_line(text: str, limit: int) -> str:
    """``text`` as one line of plain text: escape sequences, controls, invisible format characters and line breaks
    as spaces, runs of spaces as one, at most ``limit`` characters (a cut one ends with ``…``)."""
    raw = _ESCAPE.sub(" ", text[: limit * 4])  # what can be shown of it, whatever the server sent
    shown = " ".join("".join(" " if unicodedata.category(c) in _UNSHOWN else c for c in raw).split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
