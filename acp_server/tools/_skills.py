"""Agent Skills: folders holding a ``SKILL.md`` (frontmatter ``name`` and ``description``, then instructions) in
the project's ``.agents/skills/`` and ``.claude/skills/`` and the user's skills directory.

Invariants: what is listed is bounded (:data:`MAX_SKILLS` skills, each description cut at
:data:`MAX_DESCRIPTION_CHARS`, the whole listing at :data:`MAX_LISTING_CHARS`); the first folder that names a skill
wins (the project's ``.agents``, then ``.claude``, then the user's); a file is read only inside its skill's folder
(``..`` and symlinks leading out are refused) and only when it is text of at most :data:`MAX_SKILL_FILE_BYTES`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..frontmatter import frontmatter
from ._exceptions import ToolCallError

__all__ = ["MAX_SKILLS", "Skill", "find_skills", "read_skill_file", "skills_listing"]

MAX_SKILLS = 64
MAX_DESCRIPTION_CHARS = 300
MAX_LISTING_CHARS = 6_000
MAX_SKILL_FILE_BYTES = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its name, description and folder (absolute)."""

    name: str
    description: str
    folder: str


def find_skills(cwd: str, user_dir: str | None) -> tuple[Skill, ...]:
    """The skills a session in ``cwd`` has (module invariants); a folder without a readable ``SKILL.md`` that names
    a valid ``name`` and a ``description`` is skipped."""
    roots = [Path(cwd) / ".agents" / "skills", Path(cwd) / ".claude" / "skills"]
    if user_dir is not None:
        roots.append(Path(user_dir))
    found: dict[str, Skill] = {}
    for root in roots:
        try:
            folders = sorted(entry.path for entry in os.scandir(root) if entry.is_dir())
        except OSError:
            continue
        for folder in folders:
            if len(found) >= MAX_SKILLS:
                break
            try:
                with open(os.path.join(folder, "SKILL.md"), encoding="utf-8") as file:
                    head = file.read(16 * 1024)
            except (OSError, UnicodeDecodeError):
                continue
            fields, _ = frontmatter("\n".join(head.split("\n")[:200]))  # within its first 200 lines
            name, description = fields.get("name", ""), fields.get("description", "")
            if _NAME.fullmatch(name) and description and name not in found:
                description = description if len(description) <= MAX_DESCRIPTION_CHARS else description[:299] + "…"
                found[name] = Skill(name, description, os.path.realpath(folder))
    return tuple(found.values())


def skills_listing(skills: tuple[Skill, ...]) -> str:
    """The system prompt's section naming ``skills`` ('' for none), bounded."""
    if not skills:
        return ""
    lines = [
        "# Skills",
        "Skills are instructions for particular tasks. When a task matches one, read it first with the skill tool "
        "(its name), then any file it names beside it (skill with name and path).",
    ]
    size = sum(len(line) for line in lines)
    for skill in skills:
        line = f"- {skill.name}: {skill.description}"
        if size + len(line) > MAX_LISTING_CHARS:
            lines.append("- (more skills not listed)")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def read_skill_file(skills: tuple[Skill, ...], name: str, path: str | None) -> tuple[str, str]:
    """The text of skill ``name``'s ``SKILL.md`` (``path`` None) or of ``path`` inside its folder, and the file's
    absolute path; ``ToolCallError`` for an unknown skill, a path leading out of its folder, or a file that is
    not text or too large."""
    skill = next((skill for skill in skills if skill.name == name), None)
    if skill is None:
        known = ", ".join(s.name for s in skills) or "none"
        raise ToolCallError(f"no skill named {name!r}; skills: {known}", what="no such skill")
    target = os.path.realpath(os.path.join(skill.folder, path or "SKILL.md"))
    if os.path.commonpath([target, skill.folder]) != skill.folder:
        raise ToolCallError(f"{path} is outside the skill's folder", what="outside the skill")
    try:
        if os.path.getsize(target) > MAX_SKILL_FILE_BYTES:
            raise ToolCallError(f"{path} is over {MAX_SKILL_FILE_BYTES // 1024} KiB", what="too large")
        with open(target, "rb") as file:
            data = file.read(MAX_SKILL_FILE_BYTES + 1)
    except OSError as exc:
        raise ToolCallError(f"cannot read {path or 'SKILL.md'}: {exc.strerror or exc}", what="cannot read") from None
    if b"\0" in data:
        raise ToolCallError(f"{path} is not text", what="binary")
    return data.decode("utf-8", errors="replace"), target
