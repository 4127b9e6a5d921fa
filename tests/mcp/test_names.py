"""An MCP tool's name and "always" rule are its own for the session: a re-listing in another order never hands a
tool's name, nor its rule, to another tool. A raw JSON-RPC server lists ``x.y`` and ``x_y`` (one name before a hash
suffix), then lists them again in the other order."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.tools.registry import ToolSet

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
