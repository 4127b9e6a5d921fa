"""Confinement: every path a tool touches resolves inside the project directory (the session's ``cwd``) or inside
one of the session's additional directories (ACP ``additionalDirectories``): the workspace's roots.

A path is relative to the project directory or absolute inside one of the roots. It is resolved like the kernel would
(``..`` and every symbolic link, :func:`os.path.realpath`, each root's own real path included), and what lands outside
every root is refused with a :class:`ToolCallError` before anything is shown to the user or asked of the client. So is
an empty path, one with a NUL byte, and one that is not valid Unicode (a lone surrogate, which JSON can carry but no
file name can: :func:`check_unicode`). A :class:`Target` carries the resolved path three ways: ``real`` (no symbolic
link in it) for local I/O, ``path`` (absolute, spelled under its root as the session gave it) for announcements and the
client, ``rel`` (relative to the project directory; in an additional directory its absolute ``path``: a relative path
always means the project directory) for titles and messages; and ``root``, the real path of the root it lies in (what a
race-safe reopening walks from). The project directory comes first: a path inside both it and an additional directory
belongs to the project directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from ._exceptions import ToolCallError

__all__ = ["Root", "Target", "Workspace", "check_unicode", "describe_mode"]


@dataclass(frozen=True, slots=True)
class Target:
    """A confined path: ``real`` on disk, ``path`` absolute as shown, ``rel`` relative to the project (``.``; the
    absolute ``path`` in an additional directory), ``root`` the real path of the root holding it."""

    real: str
    path: str
    rel: str
    root: str

    @property
    def primary(self) -> bool:
        """Whether it lies in the project directory (not in an additional directory)."""
        return self.rel == self.inner

    @property
    def label(self) -> str:
        """What prefixes a path relative to its root in output: ``""`` in the project directory (paths stay
        relative to it), the root's absolute path and ``/`` in an additional directory."""
        inner = self.inner
        if self.primary:
            return ""
        return self.path + os.sep if inner == "." else self.path[: len(self.path) - len(inner)]

    @property
    def inner(self) -> str:
        """The path of ``real`` relative to its root (``.`` for the root itself)."""
        return "." if self.real == self.root else self.real[len(self.root.rstrip(os.sep)) + 1 :]


@dataclass(frozen=True, slots=True)
class Root:
    """One root of a workspace: ``shown`` (absolute, normalised, as the session gave it) and ``real`` (every
    symbolic link resolved); ``primary`` for the project directory."""

    shown: str
    real: str
    primary: bool

    @classmethod
    def of(cls, path: str, primary: bool = False) -> Root:
        shown = os.path.normpath(os.path.abspath(path))
        return cls(shown, os.path.realpath(shown), primary)

    def contains(self, real: str) -> bool:
        """Whether the real path ``real`` is this root or inside it."""
        return real == self.real or real.startswith(self.real.rstrip(os.sep) + os.sep)

    def target(self, real: str) -> Target:
        """The :class:`Target` of a real path inside this root."""
        inner = "." if real == self.real else real[len(self.real.rstrip(os.sep)) + 1 :]
        path = self.shown if inner == "." else os.path.join(self.shown, inner)
        return Target(real, path, inner if self.primary else path, self.real)


def describe_mode(mode: int) -> str:
    """What a file that is neither a regular file nor a directory is, in words."""
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_unicode(text: str, what: str) -> None:
    """Refuse ``text`` (the parameter ``what``) when it holds a lone surrogate: it could not be encoded for the
    OS (a path, a command) nor sent to the editor as valid JSON text."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolCallError(
            f"{what} contains text that is not valid Unicode (a lone surrogate, \\u{ord(text[exc.start]):04x}, at "
            f"character {exc.start}); send plain UTF-8 text"
        ) from None


class Workspace:
    """The roots of a session (its project directory first, then its additional directories), and the one place
    paths are resolved and confined against them."""

    __slots__ = ("cwd", "extra", "root", "roots", "sandboxed")

    def __init__(self, cwd: str, additional: Sequence[str] = (), *, sandboxed: bool = False) -> None:
        self.sandboxed = sandboxed
        """The session's mode runs commands inside the kernel sandbox."""
        primary = Root.of(cwd, primary=True)
        self.cwd = primary.shown
        self.root = primary.real
        self.roots: tuple[Root, ...] = (primary, *(Root.of(path) for path in additional))
        self.extra = self.roots[1:]
        """The additional directories, in the session's order."""

    def root_of(self, real: str) -> Root | None:
        """The first root (the project directory first) holding the real path ``real``; None: outside them all."""
        return next((root for root in self.roots if root.contains(real)), None)

    def contains(self, real: str) -> bool:
        """Whether the real path ``real`` is inside one of the roots (the project directory or an additional one)."""
        return self.root_of(real) is not None

    def relative(self, real: str) -> str:
        """How ``real`` (inside a root) is named in messages: relative to the project directory (``.`` for it), or
        its absolute path in an additional directory."""
        root = self.root_of(real)
        return real if root is None else root.target(real).rel

    def target(self, real: str) -> Target:
        """The :class:`Target` of a real path known to be inside a root."""
        root = self.root_of(real)
        if root is None:
            raise ToolCallError(f"{real} is outside the project directory {self.cwd}")
        return root.target(real)

    def _outside(self) -> str:
        if not self.extra:
            return f"the project directory {self.cwd}"
        listed = ", ".join(root.shown for root in self.extra)
        return f"the project directory {self.cwd} and the additional directories ({listed})"

    def resolve(self, path: str, what: str = "path") -> Target:
        """``path`` resolved and confined (it need not exist); ``what`` names the parameter in messages."""
        if not path:
            raise ToolCallError(
                f"{what} is empty; give a path relative to the project directory {self.cwd}", what=f"empty {what}"
            )
        if "\0" in path:
            raise ToolCallError(f"{what} {path!r} contains a NUL byte")
        check_unicode(path, what)
        joined = os.path.join(self.cwd, path)
        real = os.path.realpath(joined)
        root = self.root_of(real)
        if root is None:
            lexical = os.path.normpath(joined)
            for shown in (r.shown for r in self.roots):
                if lexical == shown or lexical.startswith(shown.rstrip(os.sep) + os.sep):
                    raise ToolCallError(
                        f"{what} '{path}' resolves to {real} through a symbolic link, outside {self._outside()}; "
                        f"only files inside {'them' if self.extra else 'it'} can be used",
                        what="links outside the project",
                        subject=path,
                    )
            raise ToolCallError(
                f"{what} '{path}' is outside {self._outside()}", what="outside the project", subject=path
            )
        return root.target(real)

    def _stat(self, target: Target) -> os.stat_result:
        try:
            return os.stat(target.real)
        except FileNotFoundError:
            raise ToolCallError(
                f"{target.rel} does not exist (use list_directory or glob to find the right path)",
                what="no such path",
                subject=target.rel,
            ) from None
        except OSError as exc:
            raise ToolCallError(f"cannot access {target.rel}: {exc.strerror}") from None

    def existing_file(self, path: str) -> Target:
        """``path`` confined, and an existing regular file (not a directory, pipe, socket or device)."""
        target = self.resolve(path)
        mode = self._stat(target).st_mode
        if stat.S_ISDIR(mode):
            raise ToolCallError(
                f"{target.rel} is a directory, not a file (use list_directory to see what it holds)",
                what="a directory, not a file",
                subject=target.rel,
            )
        if not stat.S_ISREG(mode):
            raise ToolCallError(f"{target.rel} is {describe_mode(mode)}, not a regular file; it cannot be used")
        return target

    def existing_directory(self, path: str) -> Target:
        """``path`` confined, and an existing directory."""
        target = self.resolve(path)
        mode = self._stat(target).st_mode
        if not stat.S_ISDIR(mode):
            kind = "a file" if stat.S_ISREG(mode) else describe_mode(mode)
            hint = " (use read_file to read it)" if stat.S_ISREG(mode) else ""
            raise ToolCallError(
                f"{target.rel} is {kind}, not a directory{hint}", what="not a directory", subject=target.rel
            )
        return target

    def existing(self, path: str, what: str = "path") -> tuple[Target, bool]:
        """``path`` confined, and an existing file or directory; returns it and whether it is a directory."""
        target = self.resolve(path, what)
        mode = self._stat(target).st_mode
        if stat.S_ISDIR(mode):
            return target, True
        if stat.S_ISREG(mode):
            return target, False
        raise ToolCallError(f"{target.rel} is {describe_mode(mode)}, not a file or directory")

    def writable_file(self, path: str) -> tuple[Target, bool]:
        """``path`` confined, where a file can be written: an existing regular file (returns True), or a new
        one whose nearest existing ancestor is a directory (returns False; the missing ones will be created)."""
        target = self.resolve(path)
        if target.real == target.root:
            which = "project" if target.rel == "." else "additional"
            raise ToolCallError(f"'{path}' is the {which} directory itself, not a file")
        try:
            mode = os.stat(target.real).st_mode
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise ToolCallError(f"cannot access {target.rel}: {exc.strerror}") from None
        else:
            if stat.S_ISREG(mode):
                return target, True
            kind = "a directory" if stat.S_ISDIR(mode) else describe_mode(mode)
            raise ToolCallError(f"{target.rel} is {kind}; only regular files can be written")
        ancestor = os.path.dirname(target.real)
        while not os.path.lexists(ancestor):
            ancestor = os.path.dirname(ancestor)
        if not os.path.isdir(ancestor):
            raise ToolCallError(f"cannot create {target.rel}: {self.relative(ancestor)} is not a directory")
        return target, False
