"""What an MCP server says of its tools is bounded and shown as plain text: the description the model is sent (the
server and tool suffix included) is capped, the name as shown is bounded, titles are cut and cleaned (escape
sequences, line breaks, controls, bidi and zero-width characters become spaces). A raw JSON-RPC server sends them
huge and hostile."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from acp_server.mcp import mcp_tool_name
from acp_server.mcp._text import one_line
from acp_server.mcp._tools import MAX_DESCRIPTION

from .test_names import raw_server
from .test_servers import connected

pytestmark = pytest.mark.anyio


def plain(text: str) -> bool:
    return (
        "\x1b" not in text
        and "[31m" not in text
        and all(unicodedata.category(c)[0] not in "CZ" or c == " " for c in text)
    )


def test_one_line_turns_escape_sequences_and_invisible_characters_into_spaces() -> None:
    assert one_line("a\x1b[31mred\x1b[0m\r\nb\u202ec\u200bd\x07e\x1b]0;title\x07f", 100) == "a red b c d e f"
    assert one_line("x" * 500, 10) == "x" * 9 + "…"


async def test_a_tools_huge_and_hostile_metadata_is_bounded_and_plain(tmp_path: Path) -> None:
    async with connected(tmp_path, raw_server("metadata")) as (tools, _):
        name = mcp_tool_name("raw", "t" * 300)
        tool = tools.get(name)
        assert tool is not None and len(name) <= 64
        assert len(tool.description) <= MAX_DESCRIPTION
        assert tool.description.endswith(f"(MCP server 'raw', tool '{'t' * 63}…')")
        prepared = await tools.prepare(name, "{}", cwd="/", client=None, offered=tools.names)
        for title in (tool.title or "", prepared.title):  # the tool_call, the permission request, the stored step
            assert title.startswith("raw: shown red line evil zero bell A")
            assert len(title) <= 5 + 128 and plain(title)
