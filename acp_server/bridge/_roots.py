"""A session's roots: its working directory (``cwd``) and its additional directories (ACP ``additionalDirectories``).

The one place both are checked, for every face: :func:`check_cwd` (an absolute path) and
:func:`check_additional_directories`, which refuses the whole list, before anything is created or changed, with an
:class:`InvalidInputError` naming the entry (``additionalDirectories[2]``) when an entry is not a string, not valid
Unicode, holds a NUL byte, is not absolute, is longer than a path may be, or is not an existing directory (an
entry is echoed up to 200 characters), or when there are more than
:data:`MAX_ADDITIONAL_DIRECTORIES`. :func:`active_directories` is what a session then uses: each entry normalised
(``/a/./b/`` is ``/a/b``), in the order given, without the entries that add nothing — one whose real path is the cwd's
or inside it, or one whose real path an earlier entry already has (dropped silently: they change no confinement).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeAlias

from ..errors import InvalidInputError
from ._exceptions import InvalidCwdError

__all__ = [
    "ADDITIONAL_DIRECTORIES_FIELD",
    "MAX_ADDITIONAL_DIRECTORIES",
    "Directories",
    "active_directories",
    "check_additional_directories",
    "check_cwd",
]

Directories: TypeAlias = Sequence[object] | None
"""A session's additional directories as a face gives them, unchecked (None: none given)."""

MAX_ADDITIONAL_DIRECTORIES = 32
"""The most additional directories a session may have (each one is a root every tool path is checked against)."""

ADDITIONAL_DIRECTORIES_FIELD = "additionalDirectories"

_PATH_MAX = os.pathconf("/", "PC_PATH_MAX")  # the longest path the system takes, in bytes
_MAX_SHOWN = 200  # characters of a refused entry echoed in the error


def check_cwd(cwd: str | None) -> None:
    """A session's working directory is an absolute path (None: not given)."""
    if cwd is not None and not os.path.isabs(cwd):
        raise InvalidCwdError(cwd)


def _problem(entry: object) -> str | None:
    """Why ``entry`` cannot be an additional directory (None: it can)."""
    if not isinstance(entry, str):
        return "must be a string (an absolute directory path)"
    if "\0" in entry:
        return "contains a NUL byte"
    try:
        entry.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate)"
    if not os.path.isabs(entry):
        return "must be an absolute path"
    if len(entry.encode("utf-8")) > _PATH_MAX:
        return f"is longer than the {_PATH_MAX} bytes a path may have"
    if not os.path.isdir(entry):
        return "is not a directory" if os.path.exists(entry) else "does not exist"
    return None


def check_additional_directories(
    directories: Sequence[object] | None, field: str = ADDITIONAL_DIRECTORIES_FIELD
) -> tuple[str, ...] | None:
    """``directories`` checked (None stays None: not given), normalised; refused whole, naming the first bad entry
    as ``field[i]``."""
    if directories is None:
        return None
    if isinstance(directories, str) or not isinstance(directories, Sequence):
        raise InvalidInputError.for_field(field, "must be an array of absolute directory paths")
    if len(directories) > MAX_ADDITIONAL_DIRECTORIES:
        raise InvalidInputError.for_field(
            field, f"at most {MAX_ADDITIONAL_DIRECTORIES} directories are allowed; got {len(directories)}"
        )
    for index, entry in enumerate(directories):
        problem = _problem(entry)
        if problem is not None:
            name = f"{field}[{index}]"
            if not isinstance(entry, str):
                shown = "null" if entry is None else type(entry).__name__
            else:  # a lone surrogate is never echoed as such, a long entry only in part
                cut = entry if len(entry) <= _MAX_SHOWN else entry[:_MAX_SHOWN]
                shown = ascii(cut) if "Unicode" in problem else repr(cut)
                if cut is not entry:
                    shown += f"… ({len(entry)} characters)"
            raise InvalidInputError.for_field(name, problem, f"{name}: {problem}, got {shown}")
    return tuple(os.path.normpath(str(entry)) for entry in directories)


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def active_directories(cwd: str, directories: Sequence[str]) -> tuple[str, ...]:
    """The additional directories a session in ``cwd`` uses of the checked ``directories``: in order, without those
    inside the cwd (after resolving symbolic links) and without repeats of a real path."""
    cwd_real = os.path.realpath(cwd)
    seen: set[str] = set()
    active: list[str] = []
    for directory in directories:
        real = os.path.realpath(directory)
        if _inside(real, cwd_real) or real in seen:
            continue
        seen.add(real)
        active.append(directory)
    return tuple(active)
