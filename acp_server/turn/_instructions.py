"""Project instructions: the instruction files of the session's project, read fresh for each prompt.

Where: the session's cwd and, when the cwd is inside a git repository, every directory from the repository's root
down to the cwd (nearest last). In each directory the first of :data:`INSTRUCTION_FILES` that exists is read
(``AGENTS.md``, else one of the files other agents use). Nothing outside the cwd's repository (or, outside any
repository, outside the cwd) is ever read: each file is confined to that root after resolving symbolic links, read
as the tools read text (a regular UTF-8 file, no link swapped in).

How much: :data:`MAX_INSTRUCTIONS_BYTES` in all. The nearest files get the room first (they are the most specific);
what does not fit is cut or left out, and the text says so.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from ..tools import ToolError, read_project_text

__all__ = [
    "INSTRUCTION_FILES",
    "MAX_INSTRUCTIONS_BYTES",
    "InstructionFile",
    "find_instruction_files",
    "project_instructions",
    "repository_root",
]

logger = logging.getLogger("acp_server.turn")

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md", "QWEN.md")
"""The names looked for in each directory, in order: the first one found there is that directory's file."""

MAX_INSTRUCTIONS_BYTES = 32 * 1024
"""The most the project instructions give the model, all files together."""


def repository_root(cwd: str) -> str | None:
    """The real path of the git repository (work tree) holding ``cwd``: the nearest directory at or above it with a
    ``.git`` entry (a directory, or the file of a worktree or submodule); None outside any repository."""
    directory = os.path.realpath(cwd)
    while True:
        if os.path.lexists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


@dataclass(frozen=True, slots=True)
class InstructionFile:
    """One directory's instruction file: its path relative to the root it is confined to, and its text."""

    rel: str
    text: str
    truncated: bool


def _directories(cwd: str) -> tuple[str, list[str]]:
    """The confinement root and the directories to look in, root first (the cwd alone outside a repository)."""
    real = os.path.realpath(cwd)
    root = repository_root(real) or real
    directories = [real]
    while directories[-1] != root:
        directories.append(os.path.dirname(directories[-1]))
    return root, directories[::-1]


def find_instruction_files(cwd: str, limit: int = MAX_INSTRUCTIONS_BYTES) -> tuple[list[InstructionFile], list[str]]:
    """The instruction files for ``cwd``, root first, within ``limit`` bytes together (nearest first served), and
    the paths of those left out for want of room. Blocking (a worker thread's job)."""
    root, directories = _directories(cwd)
    found: list[InstructionFile] = []
    left_out: list[str] = []
    room = limit
    for directory in reversed(directories):  # nearest first: it gets the room first
        for name in INSTRUCTION_FILES:
            path = os.path.join(directory, name)
            if not os.path.lexists(path):
                continue
            if room <= 0:
                left_out.append(os.path.relpath(path, root))
                break
            try:
                read = read_project_text(root, path, room)
            except ToolError as exc:  # outside the repository through a link, a directory, binary…
                logger.info("project instructions: %s skipped (%s)", path, exc)
                continue
            found.append(InstructionFile(read.target.rel, read.text, read.truncated))
            room -= len(read.text.encode("utf-8", "surrogatepass"))
            break
    return found[::-1], left_out[::-1]


def project_instructions(cwd: str, limit: int = MAX_INSTRUCTIONS_BYTES) -> str:
    """The project instructions as a section of the system prompt; ``""`` when there are none. Blocking."""
    files, left_out = find_instruction_files(cwd, limit)
    if not files and not left_out:
        return ""
    kb = limit // 1024
    parts = [
        "# Project instructions\n\nThe project's instruction files, from the repository root down to the working "
        "directory: follow them; where they disagree, the nearer (later) one wins."
    ]
    for file in files:
        body = file.text.rstrip("\n")
        if file.truncated:
            body += f"\n[{file.rel} cut here: project instructions are capped at {kb} KiB; read_file shows the rest]"
        parts.append(f'<instructions path="{file.rel}">\n{body}\n</instructions>')
    if left_out:
        names = ", ".join(left_out)
        parts.append(f"[Not included, for want of room (project instructions are capped at {kb} KiB): {names}]")
    return "\n\n".join(parts)
