"""Project instructions: which files are read (repository root down to the cwd, the fallback names), the cap, and
that they are read afresh at each prompt, can be turned off, and are never read outside the cwd's repository."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_server.domain import Prompt, TextPart
from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.turn import MAX_INSTRUCTIONS_BYTES, ModelSettings, ModelTurn, project_instructions, repository_root

from .test_model_turn import NO_RETRIES, Events, Session

pytestmark = pytest.mark.anyio


def _repo(path: Path) -> Path:
    """A directory that is a git repository's work tree (a ``.git`` entry is what marks one)."""
    (path / ".git").mkdir(parents=True)
    return path


def test_the_cwds_agents_md_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Run the tests with `make check`.\n")
    text = project_instructions(str(tmp_path))
    assert text.startswith("# Project instructions")
    assert '<instructions path="AGENTS.md">\nRun the tests with `make check`.\n</instructions>' in text


def test_no_instruction_file_gives_no_section(tmp_path: Path) -> None:
    assert project_instructions(str(tmp_path)) == ""


def test_inside_a_repository_every_directory_from_the_root_down_to_the_cwd_is_read_nearest_last(
    tmp_path: Path,
) -> None:
    root = _repo(tmp_path / "repo")
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "AGENTS.md").write_text("root rules")
    (root / "pkg" / "AGENTS.md").write_text("pkg rules")
    (root / "pkg" / "sub" / "AGENTS.md").write_text("sub rules")
    text = project_instructions(str(root / "pkg" / "sub"))
    assert text.index("root rules") < text.index("pkg rules") < text.index("sub rules")
    assert '<instructions path="pkg/sub/AGENTS.md">' in text


@pytest.mark.parametrize(
    ("present", "read"),
    [
        (["CLAUDE.md"], "CLAUDE.md"),
        (["GEMINI.md"], "GEMINI.md"),
        (["QWEN.md"], "QWEN.md"),
        (["GEMINI.md", "CLAUDE.md"], "CLAUDE.md"),
        (["CLAUDE.md", "AGENTS.md"], "AGENTS.md"),
    ],
)
def test_without_agents_md_the_first_of_the_other_agents_files_is_read(
    tmp_path: Path, present: list[str], read: str
) -> None:
    for name in present:
        (tmp_path / name).write_text(f"from {name}")
    text = project_instructions(str(tmp_path))
    assert f"from {read}" in text
    assert all(f"from {name}" not in text for name in present if name != read)  # one file per directory


def test_the_fallback_is_per_directory(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "sub").mkdir()
    (root / "AGENTS.md").write_text("root agents")
    (root / "sub" / "CLAUDE.md").write_text("sub claude")
    text = project_instructions(str(root / "sub"))
    assert "root agents" in text and "sub claude" in text


def test_instructions_are_capped_in_total_the_nearest_served_first_with_a_note(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "sub").mkdir()
    (root / "AGENTS.md").write_text("R" * (MAX_INSTRUCTIONS_BYTES - 1000) + "ROOT-END")
    (root / "sub" / "AGENTS.md").write_text("near " * 400)  # 2000 bytes: whole
    text = project_instructions(str(root / "sub"))
    assert ("near " * 400).strip() in text
    assert "ROOT-END" not in text
    assert "[AGENTS.md cut here: project instructions are capped at 32 KiB" in text
    assert text.count("R") <= MAX_INSTRUCTIONS_BYTES - 2000 + 10  # the root file got only what was left


def test_a_file_past_the_cap_is_named_as_left_out(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "sub").mkdir()
    (root / "AGENTS.md").write_text("root, left out")
    (root / "sub" / "AGENTS.md").write_text("x" * (MAX_INSTRUCTIONS_BYTES + 5000))
    text = project_instructions(str(root / "sub"))
    assert "root, left out" not in text
    assert "Not included, for want of room" in text and ": AGENTS.md]" in text
    assert len(text.encode()) < MAX_INSTRUCTIONS_BYTES + 1024  # the cap holds, notes aside


def test_nothing_above_the_repository_root_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("ABOVE THE REPOSITORY")
    root = _repo(tmp_path / "repo")
    (root / "AGENTS.md").write_text("in the repository")
    assert repository_root(str(root)) == os.path.realpath(root)
    text = project_instructions(str(root))
    assert "in the repository" in text and "ABOVE THE REPOSITORY" not in text


def test_outside_a_repository_only_the_cwd_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("PARENT")
    (tmp_path / "project").mkdir()
    if repository_root(str(tmp_path)) is not None:
        pytest.skip("the temporary directory is inside a git repository here")
    assert "PARENT" not in project_instructions(str(tmp_path / "project"))


def test_an_instruction_file_linking_outside_the_repository_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("SECRET OUTSIDE")
    root = _repo(tmp_path / "repo")
    (root / "AGENTS.md").symlink_to(secret)
    (root / "CLAUDE.md").write_text("claude inside")
    text = project_instructions(str(root))
    assert "SECRET OUTSIDE" not in text
    assert "claude inside" in text  # the link is skipped: the next name of the directory is read


def test_a_binary_or_directory_instruction_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"\x00\x01binary")
    (tmp_path / "CLAUDE.md").mkdir()
    (tmp_path / "GEMINI.md").write_text("gemini text")
    text = project_instructions(str(tmp_path))
    assert "binary" not in text and "gemini text" in text


# -- through a turn: fresh at each prompt, or off ----------------------------------------------------------------


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


async def _system_of_next_turn(model: LoopbackModel, runner: ModelTurn, cwd: Path) -> str:
    model.enqueue(Answer(text="ok", reasoning=""))
    session = Session(model, cwd=str(cwd))
    assert await runner(session, Prompt((TextPart("hi"),)), Events(session)) == "end_turn"
    system = model.requests[-1].body["messages"][0]
    assert system["role"] == "system"
    return str(system["content"])


async def test_an_edit_of_agents_md_reaches_the_next_prompt(model: LoopbackModel, tmp_path: Path) -> None:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    try:
        (tmp_path / "AGENTS.md").write_text("first version")
        assert "first version" in await _system_of_next_turn(model, runner, tmp_path)
        (tmp_path / "AGENTS.md").write_text("second version")
        second = await _system_of_next_turn(model, runner, tmp_path)
        assert "second version" in second and "first version" not in second
        (tmp_path / "AGENTS.md").unlink()
        assert "# Project instructions" not in await _system_of_next_turn(model, runner, tmp_path)
    finally:
        await runner.aclose()


async def test_project_instructions_can_be_turned_off(model: LoopbackModel, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("do not read me")
    settings = ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES, project_instructions=False)
    runner = ModelTurn(settings)
    try:
        system = await _system_of_next_turn(model, runner, tmp_path)
        assert "do not read me" not in system and "# Project instructions" not in system
        assert "# Environment" in system  # the rest of the system prompt stays
    finally:
        await runner.aclose()
