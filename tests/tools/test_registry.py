"""The tool registry: a session's ToolSet offers the built-ins first and each source's tools after them, keeps names
unique, applies the one offer rule of the modes, and rebuilds its OpenAI entries when a source changes."""

from __future__ import annotations

from typing import Any

import pytest

from acp_server.tools import READ_ONLY_TOOLS, TOOL_NAMES, ToolCallError, openai_tools
from acp_server.tools._validate import schema_check
from acp_server.tools.builtin import BUILTIN_TOOLS, builtin_tool_set
from acp_server.tools.registry import Tool

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}


async def _never(args: Any, workspace: Any, client: Any) -> Any:
    return args  # what the set validated, handed back for the test to see


def tool(name: str, *, read_only: bool, source: str = "srv") -> Tool:
    kind: Any = "read" if read_only else "other"
    return Tool(
        name, f"{name} tool", SCHEMA, kind, read_only, _never, check=schema_check(SCHEMA), source=source
    )


def test_the_built_ins_are_eight_tools_with_their_nature() -> None:
    assert tuple(t.name for t in BUILTIN_TOOLS) == TOOL_NAMES
    assert {t.name for t in BUILTIN_TOOLS if t.read_only} == READ_ONLY_TOOLS
    assert all(t.needs_permission != t.read_only and t.args is not None for t in BUILTIN_TOOLS)
    assert openai_tools(TOOL_NAMES) == [t.entry for t in BUILTIN_TOOLS]


async def test_sources_join_after_the_built_ins_and_leave_again() -> None:
    tools = builtin_tool_set()
    before = tools.entries(tools.offered("default"))
    tools.set_source("srv", [tool("mcp__srv__look", read_only=True), tool("mcp__srv__change", read_only=False)])
    tools.set_source("dup", [tool("read_file", read_only=True, source="dup")])  # a taken name is left out
    assert tools.names == (*TOOL_NAMES, "mcp__srv__look", "mcp__srv__change")
    assert tools.get("read_file") is BUILTIN_TOOLS[0]
    assert tools.offered("read-only") == (*sorted(READ_ONLY_TOOLS, key=TOOL_NAMES.index), "mcp__srv__look")
    assert tools.offered("nonsense") == tools.offered("read-only")  # fail safe
    assert tools.offered("bypass-permissions") == tools.names
    entries = tools.entries(tools.offered("default"))
    assert entries[: len(before)] == before and [e["function"]["name"] for e in entries[len(before) :]] == [
        "mcp__srv__look",
        "mcp__srv__change",
    ]
    offered = tools.offered("default")
    assert tools.still_offered(offered, "read-only") == tools.offered("read-only")
    assert await tools.prepare("mcp__srv__look", '{"n": 2}', cwd="/", client=None, offered=offered) == {"n": 2}
    with pytest.raises(ToolCallError, match="n: 0 is less than the minimum of 1"):
        await tools.prepare("mcp__srv__look", '{"n": 0}', cwd="/", client=None, offered=offered)
    with pytest.raises(ToolCallError, match="not available in this session"):
        await tools.prepare("mcp__srv__change", '{"n": 2}', cwd="/", client=None, offered=tools.offered("read-only"))
    tools.drop_source("srv")
    assert tools.names == TOOL_NAMES
    assert tools.entries(tools.offered("default")) == before
    with pytest.raises(ToolCallError, match="unknown tool 'mcp__srv__look'"):
        await tools.prepare("mcp__srv__look", "{}", cwd="/", client=None, offered=offered)
    assert builtin_tool_set().names == TOOL_NAMES  # every session starts from the built-ins alone
