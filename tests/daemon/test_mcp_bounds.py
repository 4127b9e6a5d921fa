"""An MCP tool's huge result is bounded for the editor and the store as for the model: the ``tool_call`` update's
content, the stored step and the replay hold the capped text (a note of what was cut), never the whole result.
Real daemon in process, the test MCP server as a real child process, the loopback model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import OUTPUT_LIMIT_BYTES

from ._support import running_daemon
from .test_tools import TOKEN, call_updates, until

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "py_server.py")
PY = {"name": "py", "command": sys.executable, "args": [SERVER], "env": []}
SIZE = 2 * 1024 * 1024


async def test_a_huge_result_reaches_the_editor_and_the_store_capped(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        created = await served.client.post("/session", json={"cwd": str(tmp_path), "mcpServers": [PY]}, timeout=30)
        assert created.status_code == 201, created.text
        session_id = created.json()["sessionId"]
        model.enqueue(ToolCalls((ScriptedCall("mcp__py__big", {"size": SIZE}, id="b1"),)), Answer(text="ok"))
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "big?")).status_code == 202
            seen = await until(events, "turn_complete")
        final = call_updates(seen, "b1")[-1]
        assert final["status"] == "completed"
        assert len(json.dumps(final)) < 2 * OUTPUT_LIMIT_BYTES  # content and rawOutput alike
        [shown] = [block["content"]["text"] for block in final["content"]]
        assert len(shown.encode()) <= OUTPUT_LIMIT_BYTES and "the rest was cut" in shown

        entry: Any = served.bridge.get(session_id)
        [call] = [c for m in entry.conversation.messages for step in m.steps for c in step.calls]
        assert call.output == shown and [c.text for c in call.content] == [shown]
        assert call.raw_output is None  # its JSON (the whole text again) is over the cap
        _, stored = await served.bridge.load_session(session_id)  # what a replay reads back from the store
        assert len(repr(stored)) < 4 * OUTPUT_LIMIT_BYTES
