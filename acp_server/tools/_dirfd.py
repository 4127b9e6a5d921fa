"""Confined under races: a checked path is reached again through directory descriptors, never through its name.

A :class:`Target` was resolved (every symbolic link followed) and confined when its call was prepared; by the time it
runs (a permission request may have waited minutes) another process may have swapped one of its directories for a
symbolic link to somewhere else. :func:`open_parent` walks from ``/`` through the real path of the target's root (the
project directory, or the additional directory it lies in) to the target's directory one component at a time, each
opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to the one before (``openat``), so a component that is no longer a
real directory fails the call with a :class:`ToolCallError` naming it, and the final name is then used relative to that
directory's descriptor (``dir_fd=``): nothing is read, created or replaced outside that root, whatever was swapped in
and when.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from ._exceptions import ToolCallError
from ._workspace import Target

__all__ = ["open_parent", "project_root"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def project_root(target: Target) -> str:
    """The real path of the root (the project directory, or an additional directory) ``target`` was confined to."""
    return target.root


def _swapped(target: Target, parent_fd: int, name: str, shown: str, verb: str) -> ToolCallError:
    """Why ``name`` (``shown`` in the project) could not be opened as a directory: what it is now."""
    try:
        mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        now = "a symbolic link"
    elif stat.S_ISREG(mode):
        now = "a file"
    else:
        now = "something else" if mode else "gone"
    return ToolCallError(
        f"cannot {verb} {target.rel}: {shown} changed after the call was checked (it is now {now}, no longer the "
        f"directory inside the {'project' if target.primary else 'additional directory'} it was); nothing was done"
    )


def _open_directory(target: Target, fd: int, part: str, shown: str, *, create: bool, verb: str) -> int:
    """``part`` of the directory ``fd``, opened without following it; created first when missing and ``create``."""
    for attempt in range(2):
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create or attempt:
                raise ToolCallError(f"cannot {verb} {target.rel}: {shown} does not exist (any more)") from None
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
        except OSError as exc:
            if isinstance(exc, NotADirectoryError) or exc.errno == errno.ELOOP:  # ELOOP: how some systems say it
                raise _swapped(target, fd, part, shown, verb) from None
            raise ToolCallError(f"cannot {verb} {target.rel}: {shown}: {exc.strerror}") from None
    raise AssertionError("unreachable")


def _open_root(target: Target, verb: str) -> int:
    """The project directory, reached from ``/`` without following a symbolic link (its path is a real one)."""
    root = project_root(target)
    fd = os.open(os.sep, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in root.split(os.sep):
            if not part:
                continue
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                which = "project" if target.primary else "additional"
                raise ToolCallError(
                    f"cannot {verb} {target.rel}: the {which} directory {root} cannot be reached as it was checked "
                    f"({exc.strerror}: its path changed since); nothing was done"
                ) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_parent(target: Target, *, create: bool, verb: str) -> tuple[int, str]:
    """A descriptor of the directory holding ``target`` (reached without following any symbolic link from the
    project directory) and the target's name in it; the caller closes the descriptor. ``create``: make missing
    directories on the way (each made relative to its parent's descriptor). ``verb`` says what the call does
    (``write``, ``read``) in the error."""
    inner = target.inner
    parts = [] if inner == "." else inner.split(os.sep)
    if not parts:
        raise ToolCallError(f"cannot {verb} the project directory itself as a file")
    label = "" if target.rel == inner else target.path[: len(target.path) - len(inner)]  # an additional root's
    fd = _open_root(target, verb)
    try:
        for depth, part in enumerate(parts[:-1]):
            shown = label + os.sep.join(parts[: depth + 1])
            child = _open_directory(target, fd, part, shown, create=create, verb=verb)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]
