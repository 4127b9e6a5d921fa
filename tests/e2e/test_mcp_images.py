"""An MCP tool's images end to end: the real agent, the test MCP server on the official ``mcp`` SDK as its child,
the loopback model recording each request, the official ACP Python SDK as the editor. The images reach the model's
next request (one user message of ``image_url`` parts after the tool message) and the editor (an image block in
the call's final update) during the turn; the stored history, and so a later prompt and a reload, keep the note."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import ContentToolCallContent, ImageContentBlock, TextContentBlock, ToolCallProgress

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from .test_mcp import agent, new_session, py_server
from .test_tools import Editor, _capabilities, _tool_messages

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
NOTE = "[image (image/png, 70 bytes)]"


def _image_parts(messages: list[dict[str, Any]]) -> list[str]:
    return [
        part["image_url"]["url"]
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]


async def test_images_reach_the_next_request_and_the_editor_and_history_keeps_the_note(tmp_path: Path) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls(
                (
                    ScriptedCall("mcp__py__image", {"count": 2}, id="i1"),
                    ScriptedCall("mcp__py__image", {"count": 1, "mime_type": "image/svg+xml"}, id="i2"),
                )
            ),
            Answer(text="two dots"),
            Answer(text="still here"),
        )
        async with agent(editor, model, state=state) as conn:
            session = await new_session(conn, project, py_server())
            await conn.prompt(session_id=session.session_id, prompt=[text_block("look")])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("and now?")])

        messages = model.requests[1].messages
        assert [m["role"] for m in messages[-4:]] == ["assistant", "tool", "tool", "user"]
        assert messages[-1]["content"][0] == {"type": "text", "text": "Images returned by mcp__py__image (call i1):"}
        assert _image_parts(messages) == [f"data:image/png;base64,{PNG}"] * 2  # the svg is a note, not an image
        tool = _tool_messages(model, 1)
        assert tool["i1"] == f"2 image(s)\n{NOTE}\n{NOTE}"
        assert "image/svg+xml" in tool["i2"] and "not shown to the model, unsupported type" in tool["i2"]

        final = editor.final("i1")
        assert final.status == "completed"
        blocks = [c.content for c in final.content if isinstance(c, ContentToolCallContent)]
        images = [b for b in blocks if isinstance(b, ImageContentBlock)]
        assert [(b.data, b.mime_type) for b in images] == [(PNG, "image/png")] * 2

        assert _image_parts(model.requests[2].messages) == []  # the next prompt's model sees the note only
        assert _tool_messages(model, 2)["i1"] == f"2 image(s)\n{NOTE}\n{NOTE}"

        reloaded = Editor()
        async with agent(reloaded, model, state=state) as conn:
            await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
            await conn.load_session(session_id=session.session_id, cwd=str(project), mcp_servers=[py_server()])
    (replayed,) = [u for u in reloaded.calls("i1") if isinstance(u, ToolCallProgress) and u.status == "completed"]
    shown = [c.content for c in replayed.content or [] if isinstance(c, ContentToolCallContent)]
    assert all(isinstance(b, TextContentBlock) for b in shown)
    assert [b.text for b in shown if isinstance(b, TextContentBlock)] == [f"2 image(s)\n{NOTE}\n{NOTE}"]
