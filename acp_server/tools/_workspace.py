"""Confinement: every path a tool touches resolves inside the project directory (the session's ``cwd``).

A path is relative to the project directory or absolute inside it. It is resolved like the kernel would (``..``
and every symbolic link, :func:`os.path.realpath`, the project directory's own real path included), and what lands
outside is refused with a :class:`ToolCallError` before anything is shown to the user or asked of the client. So
is an empty path, one with a NUL byte, and one that is not valid Unicode (a lone surrogate, which JSON can
carry but no file name can: :func:`check_unicode`). A :class:`Target` carries the resolved path three ways: ``real`` (no
symbolic link in it) for local I/O, ``path`` (absolute, spelled under the project directory as the session gave
it) for announcements and the client, ``rel`` (relative to the project directory) for titles and messages.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ._exceptions import ToolCallError

__all__ = ["Target", "Workspace", "check_unicode", "describe_mode"]


@dataclass(frozen=True, slots=True)
class Target:
    """A confined path: ``real`` on disk, ``path`` absolute as shown, ``rel`` relative to the project (``.``)."""

    real: str
    path: str
    rel: str


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
    """The project directory of a session, and the one place paths are resolved against it."""

    __slots__ = ("_prefix", "cwd", "root")

    def __init__(self, cwd: str) -> None:
        self.cwd = os.path.normpath(os.path.abspath(cwd))
        self.root = os.path.realpath(self.cwd)
        self._prefix = self.root if self.root.endswith(os.sep) else self.root + os.sep

    def contains(self, real: str) -> bool:
        """Whether the real path ``real`` is the project directory or inside it."""
        return real == self.root or real.startswith(self._prefix)

    def relative(self, real: str) -> str:
        """The path of ``real`` (inside the project) relative to it; ``.`` for the project directory."""
        return "." if real == self.root else real[len(self._prefix) :]

    def target(self, real: str) -> Target:
        """The :class:`Target` of a real path known to be inside the project."""
        rel = self.relative(real)
        return Target(real, self.cwd if rel == "." else os.path.join(self.cwd, rel), rel)

    def resolve(self, path: str, what: str = "path") -> Target:
        """``path`` resolved and confined (it need not exist); ``what`` names the parameter in messages."""
        if not path:
            raise ToolCallError(f"{what} is empty; give a path relative to the project directory {self.cwd}")
        if "\0" in path:
            raise ToolCallError(f"{what} {path!r} contains a NUL byte")
        check_unicode(path, what)
        joined = os.path.join(self.cwd, path)
        real = os.path.realpath(joined)
        if not self.contains(real):
            lexical = os.path.normpath(joined)
            if lexical == self.cwd or lexical.startswith(self.cwd.rstrip(os.sep) + os.sep):
                raise ToolCallError(
                    f"{what} '{path}' resolves to {real} through a symbolic link, outside the project directory "
                    f"{self.cwd}; only files inside it can be used"
                )
            raise ToolCallError(f"{what} '{path}' is outside the project directory {self.cwd}")
        return self.target(real)

    def _stat(self, target: Target) -> os.stat_result:
        try:
            return os.stat(target.real)
        except FileNotFoundError:
            raise ToolCallError(
                f"{target.rel} does not exist (use list_directory or glob to find the right path)"
            ) from None
        except OSError as exc:
            raise ToolCallError(f"cannot access {target.rel}: {exc.strerror}") from None

    def existing_file(self, path: str) -> Target:
        """``path`` confined, and an existing regular file (not a directory, pipe, socket or device)."""
        target = self.resolve(path)
        mode = self._stat(target).st_mode
        if stat.S_ISDIR(mode):
            raise ToolCallError(f"{target.rel} is a directory, not a file (use list_directory to see what it holds)")
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
            raise ToolCallError(f"{target.rel} is {kind}, not a directory{hint}")
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
        if target.real == self.root:
            raise ToolCallError(f"'{path}' is the project directory itself, not a file")
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
