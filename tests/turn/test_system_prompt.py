"""The system prompt: how to work, the environment block (OS, shell, date, cwd, git state), the project
instructions after it, an operator's replacement; and a slow or chatty ``git`` never holds a prompt."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import anyio
import pytest

from acp_server.domain import Prompt, TextPart
from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.turn import DEFAULT_SYSTEM_PROMPT, ModelSettings, ModelTurn, build_system_prompt, git_state

from .test_model_turn import NO_RETRIES, Events, Session

pytestmark = pytest.mark.anyio

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env, timeout=30)


def _fake_git(directory: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``git`` first on PATH running ``script`` (sh)."""
    directory.mkdir()
    fake = directory / "git"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")


async def test_the_prompt_says_how_to_work_then_the_environment_then_the_instructions(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("use tabs")
    before = datetime.now().astimezone().strftime("%Y-%m-%d")
    text = await build_system_prompt(DEFAULT_SYSTEM_PROMPT, str(tmp_path))
    after = datetime.now().astimezone().strftime("%Y-%m-%d")
    assert text.startswith(DEFAULT_SYSTEM_PROMPT)
    for advice in ("edit_file", "run the tests", "declined", "short", "update_plan"):  # the plan rules: update_plan
        assert advice in text
    assert text.index(DEFAULT_SYSTEM_PROMPT) < text.index("# Environment") < text.index("# Project instructions")
    assert any(f"- Today's date: {day} (" in text for day in (before, after))  # midnight may pass meanwhile
    assert f"- Working directory: {tmp_path}\n" in text
    assert "- Operating system: " in text and "- User's shell: " in text
    assert "- Git: not a git repository" in text


async def test_the_additional_directories_are_named_and_their_instructions_never_read(tmp_path: Path) -> None:
    project, extra = tmp_path / "project", tmp_path / "extra"
    project.mkdir()
    extra.mkdir()
    (project / "AGENTS.md").write_text("project rules")
    (extra / "AGENTS.md").write_text("rules of the other root")
    text = await build_system_prompt(DEFAULT_SYSTEM_PROMPT, str(project), additional=(str(extra),))
    environment = text[text.index("# Environment") : text.index("# Project instructions")]
    assert f"- Working directory: {project}\n" in environment
    assert "- Additional directories (" in environment and environment.rstrip().endswith(f"  - {extra}")
    assert "project rules" in text and "rules of the other root" not in text
    plain = await build_system_prompt(DEFAULT_SYSTEM_PROMPT, str(project))
    assert "Additional directories" not in plain


async def test_the_shell_is_the_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHELL", "/usr/bin/fish")
    assert "- User's shell: fish (" in await build_system_prompt("base", str(tmp_path))


@needs_git
async def test_the_git_branch_and_whether_the_tree_is_dirty(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "-b", "trunk")
    assert await git_state(str(tmp_path)) == "branch trunk (no commits yet), clean working tree"
    (tmp_path / "a.txt").write_text("a")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
    assert await git_state(str(tmp_path)) == "branch trunk, clean working tree"
    (tmp_path / "a.txt").write_text("changed")
    assert await git_state(str(tmp_path)) == "branch trunk, uncommitted changes"
    (tmp_path / "sub").mkdir()
    assert await git_state(str(tmp_path / "sub")) == "branch trunk, uncommitted changes"  # the cwd is below the root


async def test_a_git_that_never_answers_is_given_up_and_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    pid_file = tmp_path / "git.pid"
    _fake_git(tmp_path / "bin", f'echo $$ > "{pid_file}"\nexec sleep 600\n', monkeypatch)
    with anyio.fail_after(30):  # only a safety net: git_state gives up long before
        state = await git_state(str(tmp_path / "repo"), timeout_s=2.0)
    assert state == "a git repository (its state is unknown: git status took too long)"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped: nothing left running


async def test_a_git_with_endless_output_is_read_only_as_far_as_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    _fake_git(tmp_path / "bin", 'echo "## main...origin/main"\nyes " M file"\n', monkeypatch)
    with anyio.fail_after(30):
        assert await git_state(str(tmp_path / "repo"), timeout_s=10.0) == "branch main, uncommitted changes"


async def test_git_runs_without_the_agents_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    seen = tmp_path / "env.txt"
    _fake_git(tmp_path / "bin", f'env > "{seen}"\necho "## main"\n', monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("ACP_SERVER_TOKEN", "token-secret-value")
    assert await git_state(str(tmp_path / "repo"), timeout_s=10.0) == "branch main, clean working tree"
    env = seen.read_text()
    assert "secret-value" not in env
    assert "GIT_OPTIONAL_LOCKS=0" in env  # the user's own git commands never wait on ours


async def test_no_git_on_path_reads_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert await git_state(str(tmp_path)) == "a git repository (its state is unknown: git could not be run)"


# -- through a turn -------------------------------------------------------------------------------------------


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


async def test_a_turn_is_not_held_by_a_slow_git(
    model: LoopbackModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    _fake_git(tmp_path / "bin", "exec sleep 600\n", monkeypatch)
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    try:
        model.enqueue(Answer(text="ok", reasoning=""))
        session = Session(model, cwd=str(tmp_path / "repo"))
        with anyio.fail_after(60):  # a safety net; the turn waits for git ~200 ms at most
            assert await runner(session, Prompt((TextPart("hi"),)), Events(session)) == "end_turn"
        system = model.requests[0].body["messages"][0]["content"]
        assert "- Git: a git repository (its state is unknown: git status took too long)" in system
    finally:
        await runner.aclose()


async def test_an_operators_system_prompt_replaces_how_to_work_and_keeps_the_rest(
    model: LoopbackModel, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("project rule {not a placeholder}")
    own = "You are terse. {cwd} stays as written."
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES, system_prompt=own))
    try:
        model.enqueue(Answer(text="ok", reasoning=""))
        session = Session(model, cwd=str(tmp_path))
        assert await runner(session, Prompt((TextPart("hi"),)), Events(session)) == "end_turn"
        system = model.requests[0].body["messages"][0]["content"]
        assert system.startswith(own + "\n\n# Environment\n")
        assert DEFAULT_SYSTEM_PROMPT[:40] not in system
        assert "project rule {not a placeholder}" in system
    finally:
        await runner.aclose()
