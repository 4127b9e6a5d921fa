"""Skills through a real agent: listed (name and description) in the system prompt from the project's
``.agents/skills``/``.claude/skills`` and the user's directory, their ``SKILL.md`` and the files beside it read with
the ``skill`` tool and nothing outside their folder, and a skill added later listed at the next prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _skill(folder: Path, name: str, description: str, body: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")


async def test_skills_are_listed_read_and_re_read(tmp_path: Path) -> None:
    project, config = tmp_path / "project", tmp_path / "config"
    _skill(project / ".agents/skills/release", "release", "Cut a release of this project", "Run the checklist.\n")
    (project / ".agents/skills/release/checklist.md").write_text("1. bump the version\n")
    _skill(project / ".claude/skills/review", "review", "Review a change", "Read the diff.\n")
    _skill(config / "acp-server/skills/standup", "standup", "Write a standup note", "Summarise.\n")
    (tmp_path / "secret.txt").write_text("no")
    calls = (
        ScriptedCall("skill", {"name": "release"}),
        ScriptedCall("skill", {"name": "release", "path": "checklist.md"}),
        ScriptedCall("skill", {"name": "release", "path": "../../../secret.txt"}),
    )
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls(calls), Answer(text="done"), Answer(text="again"))
        env = {"XDG_CONFIG_HOME": str(config)}
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m", env=env) as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(project))
            prompt = [{"type": "text", "text": "release it"}]
            reply = await agent.request("session/prompt", {"sessionId": session_id, "prompt": prompt}, timeout=60)
            assert reply["result"]["stopReason"] == "end_turn", reply
            system = model.requests[0].messages[0]["content"]
            assert "- release: Cut a release of this project" in system
            assert "- review: Review a change" in system and "- standup: Write a standup note" in system
            outputs = [m["content"] for m in model.requests[1].messages if m["role"] == "tool"]
            assert "Run the checklist." in outputs[0]
            assert outputs[1] == "1. bump the version\n"
            assert outputs[2].startswith("Error:") and "outside the skill" in outputs[2]

            _skill(project / ".agents/skills/deploy", "deploy", "Deploy to staging", "Deploy.\n")
            reply = await agent.request("session/prompt", {"sessionId": session_id, "prompt": prompt}, timeout=60)
            assert reply["result"]["stopReason"] == "end_turn", reply
            assert "- deploy: Deploy to staging" in model.requests[-1].messages[0]["content"]
