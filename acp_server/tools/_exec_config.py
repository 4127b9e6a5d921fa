"""Files that make the user's own tools run code: writing one is a command, not an edit.

git runs what its config names (``core.fsmonitor`` at every ``git status``, which the editor's git integration runs
every few seconds), its hooks, and the filters its attributes name; editors run the tasks and the interpreters their
workspace settings name when a folder opens; direnv runs ``.envrc`` on ``cd``; hook managers run what their config
lists at each commit. A write or an edit of such a file (:data:`EXEC_CONFIG`, plus any directory git would take for
a git directory, plus the repository's ``core.hooksPath``) is announced with kind ``execute`` and the reason in its
title, so the mode asks as it does for a command (also in ``accept-edits``).

Matching is on the resolved path (``..``, ``./`` and every symbolic link resolved, so a link into ``.git`` is
``.git``), component by component, ignoring case and what case-insensitive file systems ignore (HFS+'s ignorable
code points, NTFS's trailing dots and spaces, ``GIT~1``): being wrong there only asks once more. The project's own
code that tools run (``build.rs``, ``eslint.config.js``, ``conftest.py``, a ``Makefile``) is not matched: it is the
code the user reviews as such.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from fnmatch import fnmatchcase

from ._types import PreparedCall
from ._workspace import Workspace

__all__ = ["EXEC_CONFIG", "exec_config_reason", "guard_exec_config"]

EXEC_CONFIG: tuple[tuple[str, str], ...] = (
    (".git/config", "git config"),
    (".git/config.worktree", "git config"),
    (".git/modules/**/config", "git config"),
    (".git/worktrees/*/config.worktree", "git config"),
    (".git/hooks/**", "git hook"),
    (".git/info/attributes", "git attributes: filters"),
    (".git/**", "git's own directory"),
    (".envrc", "direnv"),
    (".vscode/tasks.json", "VS Code tasks"),
    (".vscode/settings.json", "VS Code settings"),
    ("*.code-workspace", "VS Code workspace"),
    (".zed/settings.json", "Zed settings"),
    (".zed/tasks.json", "Zed tasks"),
    (".idea/**", "JetBrains project settings"),
    (".husky/**", "husky git hook"),
    (".pre-commit-config.yaml", "pre-commit hooks"),
    (".pre-commit-config.yml", "pre-commit hooks"),
    ("lefthook.*", "lefthook git hooks"),
    (".lefthook.*", "lefthook git hooks"),
    ("lefthook-local.*", "lefthook git hooks"),
    (".lefthook-local.*", "lefthook git hooks"),
)
"""``(pattern, reason)``, first match wins. A pattern's ``/``-separated globs match consecutive components of the
path, the last one its file name; ``**`` matches any number of components (none included). Lower case: names are
compared folded."""

_PATTERNS = tuple((tuple(pattern.split("/")), reason) for pattern, reason in EXEC_CONFIG)

_IGNORABLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")
"""Code points HFS+ ignores in names (git's own ``is_hfs_dotgit`` list and its neighbours)."""

_MAX_POINTER = 4096  # a ``.git`` file is one line
_MAX_CONFIG = 1024 * 1024  # a repository's config read for core.hooksPath


def _fold(name: str) -> str:
    """A file name as a case-insensitive file system compares it."""
    folded = _IGNORABLE.sub("", name).casefold().rstrip(" .") or name
    return ".git" if folded == "git~1" else folded


def _matches(parts: tuple[str, ...], names: list[str]) -> bool:
    """Whether the globs ``parts`` match ``names`` (whole, ``**`` as any run of names)."""
    if not parts:
        return not names
    head, rest = parts[0], parts[1:]
    if head == "**":
        return any(_matches(rest, names[i:]) for i in range(len(names) + 1))
    return bool(names) and fnmatchcase(names[0], head) and _matches(rest, names[1:])


def _pattern_reason(names: list[str]) -> str | None:
    for parts, reason in _PATTERNS:
        if "**" not in parts:  # it ends at the file name: one place to try
            start = len(names) - len(parts)
            if start >= 0 and _matches(parts, names[start:]):
                return reason
            continue
        for start, name in enumerate(names):
            if fnmatchcase(name, parts[0]) and _matches(parts, names[start:]):
                return reason
    return None


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _is_git_dir(path: str) -> bool:
    """Whether git would take ``path`` for a git directory (as its ``is_git_directory``: a ``HEAD`` and an
    ``objects`` directory, or a ``commondir`` file for a linked worktree's)."""
    return _is_file(os.path.join(path, "HEAD")) and (
        os.path.isdir(os.path.join(path, "objects")) or _is_file(os.path.join(path, "commondir"))
    )


def _read(path: str, limit: int) -> str:
    """At most ``limit`` bytes of the regular file ``path``; "" for anything else (a named pipe is never waited on:
    it is opened without blocking, then passed over)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        with open(fd, "rb", closefd=False) as file:
            return file.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _git_dirs(top: str) -> list[str]:
    """The git directories of the working tree at ``top``: its ``.git`` directory, or the one its ``.git`` file
    names (``gitdir: …``, a worktree's or a submodule's), with the common directory it shares."""
    dot_git = os.path.join(top, ".git")
    if os.path.isdir(dot_git):
        found = [os.path.realpath(dot_git)]
    elif _is_file(dot_git):
        match = re.match(r"gitdir:\s*(.+?)\s*$", _read(dot_git, _MAX_POINTER), re.MULTILINE)
        if match is None:
            return []
        found = [os.path.realpath(os.path.join(top, match.group(1)))]
    else:
        return []
    common = _read(os.path.join(found[0], "commondir"), _MAX_POINTER).strip()
    if common:
        found.append(os.path.realpath(os.path.join(found[0], common)))
    return found


_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)\s*(?:"[^"]*"\s*)?\]')
_HOOKS_PATH = re.compile(r'\s*hookspath\s*=\s*("(?:[^"\\]|\\.)*"|[^;#]*)', re.IGNORECASE)


def _hooks_path(config: str) -> str | None:
    """The last ``core.hooksPath`` a git config file sets (``include`` is not followed)."""
    section, found = "", None
    for line in config.splitlines():
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).lower() if '"' not in line else ""
            line = line[header.end() :]
        if section == "core" and (value := _HOOKS_PATH.match(line)) is not None:
            raw = value.group(1).strip()
            found = raw[1:-1] if raw.startswith('"') else raw
    return found or None


def _inside(real: str, directory: str) -> bool:
    return real == directory or real.startswith(directory.rstrip(os.sep) + os.sep)


def _repository_reason(workspace: Workspace, real: str) -> str | None:
    """Why ``real`` is a repository's file git runs code from, judged by what is on disk: inside a directory git
    takes for a git directory (wherever a ``.git`` file points), or inside a repository's ``core.hooksPath``. The
    walk up goes past the root of ``real`` (the project directory, an additional directory) to ``/``: a root inside a
    git directory (a bare repository's ``hooks``) or inside a repository whose hooks path points into it is judged
    by what lies above it (only read, and being wrong only asks once more)."""
    if not workspace.contains(real):
        return None
    directory = os.path.dirname(real)
    while True:
        if _is_git_dir(directory):
            return "git's own directory"
        for git_dir in _git_dirs(directory):
            if _inside(real, git_dir):
                return "git's own directory"
            hooks = _hooks_path(_read(os.path.join(git_dir, "config"), _MAX_CONFIG))
            hooks_dir = None if hooks is None else os.path.join(directory, os.path.expanduser(hooks))  # from the top
            if hooks_dir is not None and _inside(real, os.path.realpath(hooks_dir)):
                return "git hook (core.hooksPath)"
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def exec_config_reason(workspace: Workspace, real: str) -> str | None:
    """Why writing the resolved path ``real`` (inside the project) makes the user's tools run code, in a few
    words for a title; None when it does not."""
    names = [_fold(name) for name in real.split(os.sep) if name]
    return _pattern_reason(names) or _repository_reason(workspace, real)


def guard_exec_config(prepared: PreparedCall, workspace: Workspace) -> PreparedCall:
    """``prepared`` as a command when it is an edit of a file that runs code (its kind ``execute``, the reason
    in its title), else unchanged."""
    if prepared.kind != "edit":
        return prepared
    for location in prepared.locations:
        reason = exec_config_reason(workspace, os.path.realpath(location.path))
        if reason is not None:
            return dataclasses.replace(prepared, kind="execute", title=f"{prepared.title} (runs code: {reason})")
    return prepared
