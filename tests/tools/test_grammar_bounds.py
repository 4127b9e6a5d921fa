"""Tool schemas every grammar-constrained server accepts: what the model is sent carries no bound over
MAX_SCHEMA_REPETITION (so llama.cpp can make a grammar of it), built-in and MCP tools alike, while the full bound
is still enforced by the tool's validation with an error that tells the model the limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.grammar_bounds import (
    LLAMA_CPP_REPETITION_LIMIT,
    MAX_SCHEMA_REPETITION,
    grammar_problem,
    grammar_safe,
    repetitions,
)
from acp_server.tools import TOOL_NAMES, ToolCallError
from acp_server.tools._validate import schema_check
from acp_server.tools.builtin import BUILTIN, BUILTIN_TOOLS, builtin_tool_set
from acp_server.tools.registry import Tool

pytestmark = pytest.mark.anyio


def test_every_built_in_schema_the_model_sees_makes_a_grammar_llama_cpp_accepts() -> None:
    for entry in BUILTIN.entries(TOOL_NAMES):
        counts = [count for _, count in repetitions(entry)]
        assert all(count <= MAX_SCHEMA_REPETITION for count in counts), entry["function"]["name"]
    assert grammar_problem(BUILTIN.entries(TOOL_NAMES)) is None
    plan = next(tool for tool in BUILTIN_TOOLS if tool.name == "update_plan")
    problem = grammar_problem(plan.parameters)  # the full schema: what llama.cpp refused before the rule
    assert problem is not None and f"content/maxLength: {LLAMA_CPP_REPETITION_LIMIT}" in problem
    assert ("/properties/entries/maxItems", 49) in list(repetitions(plan.parameters))  # a small bound stays


async def test_a_built_in_bound_left_out_of_the_schema_is_still_enforced_precisely(tmp_path: Path) -> None:
    too_long = '{"entries": [{"content": "%s", "status": "pending"}]}' % ("a" * 2001)
    with pytest.raises(ToolCallError, match="at most 2000 characters"):
        await BUILTIN.prepare("update_plan", too_long, cwd=str(tmp_path), client=None, offered=TOOL_NAMES)


async def _never(args: Any, workspace: Any, client: Any) -> Any:
    return args


async def test_an_mcp_tool_schema_is_sent_without_its_large_bounds_and_validated_with_them() -> None:
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": 5000, "minLength": 1},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 300},
            "maxLength": {"type": "integer", "enum": [{"maxLength": 9999}]},  # a property so named; a JSON value
        },
        "required": ["text"],
    }
    tools = builtin_tool_set()
    tool = Tool("mcp__s__t", "t", schema, "other", False, _never, check=schema_check(schema), source="s")
    tools.set_source("s", [tool])
    sent = tools.entries(["mcp__s__t"])[0]["function"]["parameters"]
    assert sent["properties"]["text"] == {"type": "string", "minLength": 1}
    assert sent["properties"]["tags"] == {"type": "array", "items": {"type": "string", "maxLength": 40}}
    assert sent["properties"]["maxLength"] == schema["properties"]["maxLength"]
    assert schema["properties"]["text"]["maxLength"] == 5000  # the tool's own schema is not mutated
    assert grammar_problem(sent) is None and grammar_problem(schema) is not None
    offered = tools.names
    assert await tools.prepare("mcp__s__t", '{"text": "%s"}' % ("a" * 5000), cwd="/", client=None, offered=offered)
    with pytest.raises(ToolCallError, match="text: is 5001 characters long; at most 5000 allowed"):
        await tools.prepare("mcp__s__t", '{"text": "%s"}' % ("a" * 5001), cwd="/", client=None, offered=offered)


def test_a_schema_without_large_bounds_is_sent_as_it_is() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": MAX_SCHEMA_REPETITION}}}
    assert grammar_safe(schema) is schema
