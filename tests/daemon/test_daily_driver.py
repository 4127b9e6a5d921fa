"""REST sessions get what ACP sessions get: the system prompt with the project's instructions, and the slash
commands (``POST /session/{id}/prompt`` with ``/model`` or ``/mode`` runs the command, with the same checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.config import Settings
from acp_server.provider.offline import Answer, LoopbackModel

from ._support import Event, running_daemon

pytestmark = pytest.mark.anyio


def said(events: list[Event]) -> str:
    return "".join(
        e.data["update"]["content"]["text"]
        for e in events
        if e.event == "session_update" and e.data["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_a_rest_prompt_gets_the_system_prompt_and_the_projects_instructions(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rest rule: run make check")
    async with LoopbackModel() as model, running_daemon(model) as served:
        session_id = await served.new_session(str(tmp_path))
        model.enqueue(Answer(text="hi"))
        assert (await served.prompt(session_id, wait="true")).status_code == 200
        system = model.requests[-1].body["messages"][0]
        assert system["role"] == "system"
        assert "# Environment" in system["content"] and f"- Working directory: {tmp_path}" in system["content"]
        assert "rest rule: run make check" in system["content"]


async def test_slash_commands_run_over_rest_with_the_checks_of_the_rest_api(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, settings=Settings(models=("m", "big"))) as served:
        session_id = await served.new_session(str(tmp_path))
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "/model big", wait="true")).status_code == 200
            seen = await events.until(lambda e: e.event == "turn_complete")
            assert said(seen) == "Model set to big: the next requests use it."
            assert "config_changed" in [e.event for e in seen]
            # A tokenless daemon offers read-only only: /mode refuses what POST /session/{id}/mode refuses.
            assert (await served.prompt(session_id, "/mode default", wait="true")).status_code == 200
            seen = await events.until(lambda e: e.event == "turn_complete")
            assert said(seen) == "Unknown mode 'default'; available: read-only."
        assert served.bridge.get(session_id).model == "big"
        assert served.bridge.get(session_id).mode == "read-only"
        assert model.requests == []  # no command reached the model
