"""A write to a file that makes the user's tools run code asks as a command does: in ``accept-edits`` too, whatever
"always" rule edits have, never in ``bypass-permissions``; the request's title says why. The real git proves the
stake: the planted ``core.fsmonitor`` runs at the next ``git status``."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.turn import ModelSettings, ModelTurn

from ._tools_support import Editor, Events, LoopSession, text_prompt

pytestmark = pytest.mark.anyio

GUARD_S = 10


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    return tmp_path / "repo"


def planted_config(repo: Path) -> str:
    pwned = repo.parent / "PWNED"
    return (repo / ".git" / "config").read_text() + f'[core]\n\tfsmonitor = "touch {pwned}; false"\n'


async def run_turn(model: LoopbackModel, session: LoopSession, editor: Editor) -> Events:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m"))
    emit = Events(session)
    try:
        with anyio.fail_after(GUARD_S):
            await runner(session, text_prompt("go"), emit, editor.tool_client)
    finally:
        await runner.aclose()
    return emit


def git_status(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "status", "--short"], check=False, capture_output=True, timeout=30)


async def test_accept_edits_asks_before_writing_git_config_and_a_declined_write_plants_nothing(
    model: LoopbackModel, repo: Path
) -> None:
    content = planted_config(repo)
    model.enqueue(
        ToolCalls(
            (
                ScriptedCall("write_file", {"path": "notes.txt", "content": "ok\n"}, id="w0"),
                ScriptedCall("write_file", {"path": ".git/config", "content": content}, id="w1"),
            )
        ),
        Answer(text="done"),
    )
    editor = Editor("reject_once")
    session = LoopSession(str(repo), mode="accept-edits")
    emit = await run_turn(model, session, editor)

    assert (repo / "notes.txt").read_text() == "ok\n"  # an ordinary edit still runs unasked
    [asked] = editor.asked
    assert (asked.call_id, asked.kind, asked.title) == ("w1", "execute", "Write .git/config (runs code: git config)")
    assert emit.final("w1").status == "failed"
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    git_status(repo)
    assert not (repo.parent / "PWNED").exists()


async def test_an_always_rule_for_edits_does_not_cover_a_hook_but_bypass_runs_it_unasked(
    model: LoopbackModel, repo: Path
) -> None:
    hook = ScriptedCall("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}, id="h1")
    model.enqueue(ToolCalls((hook,)), Answer(text="done"))
    editor = Editor("reject_once")
    session = LoopSession(str(repo), mode="default")
    session.permission_rules["edit"] = True  # the user said "always allow" to an edit earlier
    await run_turn(model, session, editor)
    assert [call.title for call in editor.asked] == ["Write .git/hooks/pre-commit (runs code: git hook)"]
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()

    plant = ScriptedCall("write_file", {"path": ".git/config", "content": planted_config(repo)}, id="c1")
    model.enqueue(ToolCalls((plant,)), Answer(text="done"))
    unasked = Editor()  # any request fails the test
    bypass = LoopSession(str(repo), mode="bypass-permissions")
    await run_turn(model, bypass, unasked)
    assert unasked.asked == []
    git_status(repo)
    assert (repo.parent / "PWNED").exists()  # what the permission guards against
