"""Skills without a server: found in order (the first folder naming a skill wins), bounded, listed, read inside
their folder only, and the ``skill`` tool offered only where a session has skills."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.tools import ToolCallError
from acp_server.tools._skills import MAX_DESCRIPTION_CHARS, find_skills, read_skill_file, skills_listing
from acp_server.tools.builtin import builtin_tool_set


def _skill(folder: Path, name: str, description: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: '{description}'\n---\nBody of {name}.\n")


def test_found_in_order_first_wins_and_bounded(tmp_path: Path) -> None:
    _skill(tmp_path / ".agents/skills/a", "pdf", "the project's")
    _skill(tmp_path / ".claude/skills/b", "pdf", "Claude's: loses")
    _skill(tmp_path / ".claude/skills/c", "long", "x" * 1000)
    _skill(tmp_path / "user/d", "mine", "the user's")
    (tmp_path / ".agents/skills/no-frontmatter").mkdir()
    (tmp_path / ".agents/skills/no-frontmatter/SKILL.md").write_text("just text")
    skills = find_skills(str(tmp_path), str(tmp_path / "user"))
    assert [(s.name, s.description[:13]) for s in skills] == [
        ("pdf", "the project's"),
        ("long", "xxxxxxxxxxxxx"),
        ("mine", "the user's"),
    ]
    assert len(skills[1].description) == MAX_DESCRIPTION_CHARS
    listing = skills_listing(skills)
    assert listing.startswith("# Skills") and "- pdf: the project's" in listing
    assert skills_listing(()) == ""


def test_files_are_read_inside_the_skill_folder_only(tmp_path: Path) -> None:
    _skill(tmp_path / ".agents/skills/a", "pdf", "d")
    (tmp_path / ".agents/skills/a/forms.md").write_text("forms")
    (tmp_path / ".agents/skills/a/out").symlink_to(tmp_path)
    skills = find_skills(str(tmp_path), None)
    assert read_skill_file(skills, "pdf", None)[0].endswith("Body of pdf.\n")
    assert read_skill_file(skills, "pdf", "forms.md")[0] == "forms"
    (tmp_path / "secret").write_text("no")
    for path in ("../../../secret", "out/secret", "/etc/passwd"):
        with pytest.raises(ToolCallError, match="outside the skill"):
            read_skill_file(skills, "pdf", path)
    with pytest.raises(ToolCallError, match="no skill named 'nope'; skills: pdf"):
        read_skill_file(skills, "nope", None)


def test_the_skills_are_the_tool_set_s_instructions_and_the_tool_is_read_only(tmp_path: Path) -> None:
    tools = builtin_tool_set(skills_dir=str(tmp_path / "user"))
    assert tools.instructions(str(tmp_path)) == ""
    _skill(tmp_path / ".agents/skills/a", "pdf", "Fill PDF forms")
    assert "- pdf: Fill PDF forms" in tools.instructions(str(tmp_path))
    assert "skill" in tools.offered("read-only")


def test_skill_is_offered_only_while_the_session_has_skills(tmp_path: Path) -> None:
    tools = builtin_tool_set(skills_dir=str(tmp_path / "user"))
    other = tools.copy()  # another session's set: what one session finds never changes it
    assert tools.instructions(str(tmp_path)) == ""
    assert "skill" not in tools.offered("default") and "skill" not in tools.offered("read-only")
    assert "skill" in other.offered("default")
    _skill(tmp_path / ".agents/skills/a", "pdf", "Fill PDF forms")
    tools.instructions(str(tmp_path))
    assert "skill" in tools.offered("default")
