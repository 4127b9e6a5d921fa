"""The user's own slash commands: Markdown files in ``.agents/commands/`` (the project's), ``.claude/commands/``
(Claude Code's), ``.gemini/commands/`` (gemini-cli's TOML) and the user's command directory, offered after the
built-ins and run as a normal prompt with the expanded text.

Invariants: files are read at most once a second per project (a directory listing and a ``stat`` per file decide
whether anything changed; only then are they read again); what is read is bounded (:data:`MAX_COMMANDS` commands,
:data:`MAX_FILE_BYTES` per file, names of :data:`MAX_NAME_CHARS`); a file that cannot be read or parsed is
skipped and logged, never fails a prompt. The first source that names a command wins: the project's
``.agents``, then ``.claude``, then ``.gemini``, then the user's directory. A file in a subdirectory is named with
``:`` (``git/commit.md`` is ``/git:commit``), as Claude Code and gemini-cli do.
"""

from __future__ import annotations

import logging
import os
import re
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..frontmatter import frontmatter

__all__ = ["MAX_COMMANDS", "MAX_FILE_BYTES", "CommandFiles", "UserCommand", "expand"]

logger = logging.getLogger("acp_server.commands")

MAX_COMMANDS = 200
MAX_FILE_BYTES = 64 * 1024
MAX_NAME_CHARS = 64
MAX_DEPTH = 3
RESCAN_S = 1.0
"""Files are looked at again at most this often (per project)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
_POSITIONAL = re.compile(r"\$([1-9])")


@dataclass(frozen=True, slots=True)
class UserCommand:
    """One command file: its name (without the slash), description, argument hint (None: none), body, and the
    file it came from; ``style``: ``markdown`` (``$ARGUMENTS``, ``$1``…) or ``gemini`` (``{{args}}``)."""

    name: str
    description: str
    hint: str | None
    body: str
    path: str
    style: str = "markdown"


def expand(command: UserCommand, argument: str) -> str:
    """The prompt ``command`` stands for with ``argument`` (what the user typed after it): ``$ARGUMENTS`` (or
    ``{{args}}`` in a gemini-cli file) is the whole of it, ``$1``…``$9`` its words; a body that uses none of
    them gets the argument appended after a blank line."""
    body = command.body
    words = argument.split()
    if command.style == "gemini":
        if "{{args}}" in body:
            return body.replace("{{args}}", argument)
        return f"{body}\n\n{argument}" if argument else body
    used = "$ARGUMENTS" in body or _POSITIONAL.search(body) is not None
    body = body.replace("$ARGUMENTS", argument)
    body = _POSITIONAL.sub(lambda m: words[int(m[1]) - 1] if int(m[1]) <= len(words) else "", body)
    return body if used or not argument else f"{body}\n\n{argument}"


def _read(path: Path, name: str, style: str) -> UserCommand | None:
    """The command in ``path``, or None (logged) when it is too large, not UTF-8 or malformed."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            logger.warning("command file %s is over %d bytes: skipped", path, MAX_FILE_BYTES)
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("command file %s cannot be read (%s): skipped", path, exc)
        return None
    if style == "gemini":
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            logger.warning("command file %s is not valid TOML (%s): skipped", path, exc)
            return None
        prompt, description = document.get("prompt"), document.get("description", "")
        if not isinstance(prompt, str) or not isinstance(description, str):
            logger.warning("command file %s has no prompt text: skipped", path)
            return None
        return UserCommand(name, description or _first_line(prompt), None, prompt, str(path), "gemini")
    fields, body = frontmatter(text)
    description = fields.get("description") or _first_line(body)
    return UserCommand(name, description, fields.get("argument-hint") or None, body, str(path))


def _first_line(body: str) -> str:
    line = next((line.strip() for line in body.splitlines() if line.strip()), "")
    return line if len(line) <= 100 else line[:99] + "…"


def _files(root: Path, suffix: str) -> list[tuple[str, Path]]:
    """The command files under ``root`` (names with ``:`` for subdirectories), sorted, bounded in depth and count."""
    found: list[tuple[str, Path]] = []
    stack = [(root, "", 0)]
    while stack and len(found) < MAX_COMMANDS:
        directory, prefix, depth = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir() and depth < MAX_DEPTH:
                stack.append((Path(entry.path), f"{prefix}{entry.name}:", depth + 1))
            elif entry.name.endswith(suffix) and entry.is_file():
                name = prefix + entry.name[: -len(suffix)]
                if len(name) <= MAX_NAME_CHARS and _NAME.fullmatch(name):
                    found.append((name, Path(entry.path)))
    return found[:MAX_COMMANDS]


@dataclass(slots=True)
class _Scan:
    at: float
    signature: tuple[tuple[str, int, int], ...]
    commands: tuple[UserCommand, ...]


class CommandFiles:
    """The command files of each project (by its directory) and of the user (``user_dir``: None, none), re-read
    when they change (module invariants). ``reserved``: names that are not the files' (the built-ins: they win,
    the file is named in the log)."""

    def __init__(
        self,
        user_dir: str | None,
        reserved: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._user_dir = user_dir
        self._reserved = frozenset(reserved)
        self._clock = clock
        self._scans: dict[str, _Scan] = {}

    def reserve(self, names: Iterable[str]) -> None:
        """``names`` are taken (built-in commands): a file of that name is not offered (read again from now)."""
        self._reserved |= frozenset(names)
        self._scans.clear()

    def _sources(self, cwd: str) -> list[tuple[Path, str, str]]:
        project = Path(cwd)
        sources = [
            (project / ".agents" / "commands", ".md", "markdown"),
            (project / ".claude" / "commands", ".md", "markdown"),
            (project / ".gemini" / "commands", ".toml", "gemini"),
        ]
        if self._user_dir is not None:
            sources.append((Path(self._user_dir), ".md", "markdown"))
        return sources

    def commands(self, cwd: str) -> tuple[UserCommand, ...]:
        """The commands a session in ``cwd`` offers now (looked at again at most once a second)."""
        now = self._clock()
        scan = self._scans.get(cwd)
        if scan is not None and now - scan.at < RESCAN_S:
            return scan.commands
        sources = self._sources(cwd)
        listed = [(name, path, style) for root, suffix, style in sources for name, path in _files(root, suffix)]
        signature = tuple(_stat(path) for _, path, _ in listed)
        if scan is not None and scan.signature == signature:
            scan.at = now
            return scan.commands
        chosen: dict[str, UserCommand] = {}
        for name, path, style in listed:
            if name in self._reserved:
                logger.info("command file %s is not offered: /%s is a built-in command", path, name)
                continue
            if name in chosen or len(chosen) >= MAX_COMMANDS:
                continue
            command = _read(path, name, style)
            if command is not None:
                chosen[name] = command
        if len(self._scans) >= 256 and cwd not in self._scans:
            self._scans.pop(next(iter(self._scans)))
        self._scans[cwd] = _Scan(now, signature, tuple(chosen.values()))
        return self._scans[cwd].commands


def _stat(path: Path) -> tuple[str, int, int]:
    try:
        info = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), info.st_mtime_ns, info.st_size)
