"""``acp-server ask`` reads the project's AGENTS.md like an editor's session (its cwd is the session's), and
``--no-project-instructions`` / its environment variable turn that off: a real process against the loopback model."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from acp_server.provider.offline import Answer, LoopbackModel

from ._agent import COMMAND

pytestmark = pytest.mark.anyio


async def _ask(model: LoopbackModel, cwd: Path, *args: str, **env: str) -> str:
    """Run ``ask`` in ``cwd``; the system prompt the model got."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    model.enqueue(Answer(text="ok"))
    with anyio.fail_after(60):
        result = await anyio.run_process(
            [*COMMAND, "ask", "--base-url", model.base_url, "--model", "m", *args, "hello"],
            cwd=cwd,
            env={**clean, **env},
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "ok\n"
    return str(model.requests[-1].body["messages"][0]["content"])


async def test_ask_gives_the_model_the_projects_agents_md(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("ask rule: answer in French")
    async with LoopbackModel() as model:
        system = await _ask(model, tmp_path)
        assert "ask rule: answer in French" in system and f"- Working directory: {tmp_path}" in system
        assert "ask rule" not in await _ask(model, tmp_path, "--no-project-instructions")
        assert "ask rule" not in await _ask(model, tmp_path, ACP_SERVER_NO_PROJECT_INSTRUCTIONS="1")
        assert "ask rule" in await _ask(model, tmp_path, ACP_SERVER_NO_PROJECT_INSTRUCTIONS="0")


async def test_ask_with_a_system_prompt_file(tmp_path: Path) -> None:
    (tmp_path / "prompt.md").write_text("You are the operator's own agent.")
    async with LoopbackModel() as model:
        system = await _ask(model, tmp_path, "--system-prompt-file", str(tmp_path / "prompt.md"))
        assert system.startswith("You are the operator's own agent.\n\n# Environment\n")
