"""An MCP tool's name and "always" rule are its own for the session: a re-listing in another order never hands a
tool's name, nor its rule, to another tool. A raw JSON-RPC server lists ``x.y`` and ``x_y`` (one name before a hash
suffix), then lists them again in the other order."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools.registry import ToolSet
from acp_server.turn import ModelSettings, ModelTurn
from tests.turn._tools_support import Editor, Events, LoopSession, text_prompt

from .test_servers import call, connected, eventually

pytestmark = pytest.mark.anyio

RAW = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "raw_server.py")


def raw_server(modes: str, name: str = "raw") -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [RAW], "env": [{"name": "RAW_SERVER", "value": modes}]}


async def _titles_and_rules(tools: ToolSet) -> dict[str, tuple[str, str | None]]:
    """Offered name → (title, rule) of the raw server's pair."""
    found = {}
    for name in tools.names:
        tool = tools.get(name)
        if tool is not None and tool.source == "raw" and tool.title in ("raw: x.y", "raw: x_y"):
            prepared = await tools.prepare(name, "{}", cwd="/", client=None, offered=tools.names)
            found[name] = (prepared.title, prepared.rule)
    return found


async def test_a_relisting_in_another_order_keeps_each_tools_name_and_rule(tmp_path: Path) -> None:
    async with connected(tmp_path, raw_server("names")) as (tools, _):
        before = await _titles_and_rules(tools)
        assert sorted(title for title, _ in before.values()) == ["raw: x.y", "raw: x_y"]
        assert before["mcp__raw__x_y"][0] == "raw: x.y"  # listed first: the plain name
        order = tools.names
        await call(tools, "mcp__raw__swap")
        await eventually(lambda: tools.names != order)  # re-listed: x_y now first
        after = await _titles_and_rules(tools)
        assert after == before  # x_y does not inherit x.y's name, nor its "always" rule
        rules = [rule for _, rule in after.values()]
        assert len(set(rules)) == 2 and 'mcp:["raw", "x.y"]' in rules


async def _turn(model: LoopbackModel, session: LoopSession, editor: Editor) -> None:
    policy = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=policy))
    try:
        assert await runner(session, text_prompt("go"), Events(session), editor.tool_client) == "end_turn"
    finally:
        await runner.aclose()


async def test_always_allowing_one_tool_never_allows_the_other_after_a_relisting(tmp_path: Path) -> None:
    """The issue's case through a real turn: "always allow" for ``x.y``; re-listed in the other order, ``x_y`` asks."""
    async with LoopbackModel() as model, connected(tmp_path, raw_server("names")) as (tools, _):
        session = LoopSession(str(tmp_path))
        session.tools = tools  # type: ignore[attr-defined]  # a session with MCP servers (see turn.tools_of)
        editor = Editor("allow_always", "allow_once")
        model.enqueue(ToolCalls((ScriptedCall("mcp__raw__x_y", {}, id="first"),)), Answer(text="ok"))
        await _turn(model, session, editor)
        order = tools.names
        await call(tools, "mcp__raw__swap")
        await eventually(lambda: tools.names != order)
        [other] = [name for name in tools.names if (tool := tools.get(name)) and tool.title == "raw: x_y"]
        model.enqueue(
            ToolCalls((ScriptedCall("mcp__raw__x_y", {}, id="again"), ScriptedCall(other, {}, id="second"))),
            Answer(text="ok"),
        )
        await _turn(model, session, editor)
        assert [(c.call_id, c.title) for c in editor.asked] == [("first", "raw: x.y"), ("second", "raw: x_y")]
