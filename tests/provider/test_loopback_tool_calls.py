"""Tool calls from the loopback model through the real openai SDK over real loopback sockets (asyncio, real time):
scripted calls stream as OpenAI's fragments, the unscripted model reads the file the prompt names, and the
requests keep the tools and messages the client sent."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from acp_server.provider.offline import LoopbackModel, PartialToolCalls, ScriptedCall, ToolCalls

pytestmark = pytest.mark.anyio

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file of the project.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "glob",
            "description": "Find files by pattern.",
            "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
        },
    },
]


async def collect(
    client: openai.AsyncOpenAI, messages: list[Any], tools: list[Any] | None = TOOLS
) -> list[ChatCompletionChunk]:
    extra: Any = {"tools": tools} if tools is not None else {}
    stream = await client.chat.completions.create(model="m", messages=messages, stream=True, **extra)
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.close()


Fragment = tuple[int, str | None, str | None, str | None, str]


def fragments(chunks: list[ChatCompletionChunk]) -> list[Fragment]:
    """Each tool-call fragment as ``(index, id, type, name, arguments)``, in stream order."""
    out: list[Fragment] = []
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            function = call.function
            name = function.name if function else None
            out.append((call.index, call.id, call.type, name, (function.arguments if function else None) or ""))
    return out


def assemble(chunks: list[ChatCompletionChunk]) -> list[tuple[str | None, str | None, str]]:
    """The calls as an agent assembles them: by index, id and name from the first fragment, arguments joined."""
    calls: dict[int, list[Any]] = {}
    for index, call_id, _, name, arguments in fragments(chunks):
        call = calls.setdefault(index, [call_id, name, ""])
        call[2] += arguments
    return [(calls[i][0], calls[i][1], calls[i][2]) for i in sorted(calls)]


def content(chunks: list[ChatCompletionChunk]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def finish_reasons(chunks: list[ChatCompletionChunk]) -> list[str]:
    return [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]


ASK: list[Any] = [{"role": "user", "content": "go"}]


async def test_a_call_streams_as_openai_does_head_then_argument_pieces_then_tool_calls_finish(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    arguments = {"path": "src/app.py", "offset": 3}
    model.enqueue(ToolCalls((ScriptedCall("read_file", arguments, id="call_a"),), fragment_size=5))
    chunks = await collect(client, ASK)
    assert chunks[0].choices[0].delta.role == "assistant"
    got = fragments(chunks)
    assert got[0] == (0, "call_a", "function", "read_file", "")
    pieces = [f[4] for f in got[1:]]
    assert all(f[:4] == (0, None, None, None) for f in got[1:])
    assert all(1 <= len(p) <= 5 for p in pieces) and len(pieces) > 3
    assert "".join(pieces) == json.dumps(arguments)
    assert finish_reasons(chunks) == ["tool_calls"]
    assert content(chunks) == ""
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.tool_calls) == len(got)  # one per chunk


async def test_text_comes_before_the_calls(model: LoopbackModel, client: openai.AsyncOpenAI) -> None:
    model.enqueue(ToolCalls((ScriptedCall("glob", {"pattern": "*.py"}),), text="Let me look."))
    chunks = await collect(client, ASK)
    deltas = [c.choices[0].delta for c in chunks if c.choices and not c.choices[0].finish_reason]
    kinds = ["text" if delta.content else "call" for delta in deltas]
    assert kinds == ["text", "text", "text", "call", "call", "call"]
    assert content(chunks) == "Let me look."


@pytest.mark.parametrize("interleave", [False, True])
async def test_parallel_calls_keep_their_indices_and_pass_anything_through(
    model: LoopbackModel, client: openai.AsyncOpenAI, interleave: bool
) -> None:
    calls = (
        ScriptedCall("read_file", {"path": "a.txt"}, id="call_1"),
        ScriptedCall("frobnicate", {"x": "ü " * 10}, id="call_2"),  # an unknown tool is just a name
        ScriptedCall("grep", '{"pattern": "a(", "path"', id="call_3"),  # malformed JSON, sent as given
    )
    model.enqueue(ToolCalls(calls, fragment_size=4, interleave=interleave))
    chunks = await collect(client, ASK)
    assert assemble(chunks) == [(c.id, c.name, c.arguments_text) for c in calls]
    indices = [f[0] for f in fragments(chunks)]
    if interleave:
        assert indices[:6] == [0, 1, 2, 0, 1, 2]
    else:
        assert indices == sorted(indices)
    assert finish_reasons(chunks) == ["tool_calls"]


async def test_unset_ids_are_unique_per_request_and_position(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    await collect(client, ASK)  # request 0: an answer
    model.enqueue(ToolCalls((ScriptedCall("glob"), ScriptedCall("glob"))))
    chunks = await collect(client, ASK)
    assert [call[0] for call in assemble(chunks)] == ["call_loopback_1_0", "call_loopback_1_1"]
    assert [call[2] for call in assemble(chunks)] == ["{}", "{}"]


async def test_without_a_fragment_size_each_call_is_one_whole_fragment(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    calls = (ScriptedCall("read_file", {"path": "a"}, id="x"), ScriptedCall("glob", "", id="y"))
    model.enqueue(ToolCalls(calls, fragment_size=None, finish_reason="stop"))
    chunks = await collect(client, ASK)
    assert fragments(chunks) == [(0, "x", "function", "read_file", '{"path": "a"}'), (1, "y", "function", "glob", "")]
    assert finish_reasons(chunks) == ["stop"]


async def test_a_non_streaming_request_gets_the_calls_in_its_message(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(ToolCalls((ScriptedCall("read_file", {"path": "a"}, id="x"), ScriptedCall("glob", "{", id="y"))))
    completion = await client.chat.completions.create(model="m", messages=ASK)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    dumped = [c.model_dump() for c in message.tool_calls or []]
    assert [(d["id"], d["type"], d["function"]["name"], d["function"]["arguments"]) for d in dumped] == [
        ("x", "function", "read_file", '{"path": "a"}'),
        ("y", "function", "glob", "{"),
    ]


CALL = (ScriptedCall("read_file", {"path": "README.md"}, id="c"),)


async def test_partial_calls_then_hold_until_the_client_leaves(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(PartialToolCalls(CALL, fragments=2, fragment_size=3))
    stream = await client.chat.completions.create(model="m", messages=ASK, stream=True)
    try:
        first, second = [await stream.__anext__() for _ in range(2)]
    finally:
        await stream.close()
    assert fragments([first, second]) == [(0, "c", "function", "read_file", ""), (0, None, None, None, '{"p')]
    (disconnect,) = await model.wait_for_disconnects(1)
    assert disconnect.chunks_sent == 2


async def test_partial_calls_then_end_leave_the_stream_without_a_finish(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(PartialToolCalls(CALL, fragments=99, then="end"))  # more than there are: all of them
    chunks = await collect(client, ASK)
    assert assemble(chunks) == [("c", "read_file", '{"path": "README.md"}')]
    assert finish_reasons(chunks) == []


async def test_partial_calls_then_reset_fail_the_stream_after_the_fragment(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(PartialToolCalls(CALL, then="reset"))
    stream = await client.chat.completions.create(model="m", messages=ASK, stream=True)
    got: list[ChatCompletionChunk] = []
    try:
        with pytest.raises(openai.APIConnectionError):
            async for chunk in stream:
                got.append(chunk)
    finally:
        await stream.close()
    assert fragments(got) == [(0, "c", "function", "read_file", "")]


async def test_the_unscripted_model_reads_the_file_the_prompt_names_then_answers_from_the_result(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    history: list[Any] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is in README.md?"},
    ]
    chunks = await collect(client, history)
    assert assemble(chunks) == [("call_loopback_0_0", "read_file", '{"path": "README.md"}')]
    assert finish_reasons(chunks) == ["tool_calls"]
    function = {"name": "read_file", "arguments": '{"path": "README.md"}'}
    call = {"id": "call_loopback_0_0", "type": "function", "function": function}
    history += [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "     1\t# acp-server\n     2\t\n     3\tText.\n"},
    ]
    chunks = await collect(client, history)
    assert content(chunks) == "README.md has 3 lines. Its first line is: “# acp-server”."
    assert finish_reasons(chunks) == ["stop"]
    assert [r.messages for r in model.requests] == [history[:2], history]


async def test_without_the_read_file_tool_the_prompt_is_echoed_as_before(client: openai.AsyncOpenAI) -> None:
    ask = [{"role": "user", "content": "what is in README.md?"}]
    assert content(await collect(client, ask, tools=None)) == "You said: what is in README.md?"
    assert content(await collect(client, ask, tools=TOOLS[1:])) == "You said: what is in README.md?"
    assert content(await collect(client, [{"role": "user", "content": "hi"}])) == "You said: hi"


async def test_recorded_requests_keep_the_tools_and_messages_sent(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "glob", "arguments": '{"pattern": "*"}'}}
    history: list[Any] = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
    ]
    await collect(client, history)
    await collect(client, ASK, tools=None)
    with_tools, without = await model.wait_for_requests(2)
    assert with_tools.tools == TOOLS
    assert with_tools.tool_names == ["read_file", "glob"]
    assert with_tools.messages == history
    assert with_tools.messages[1]["tool_calls"] == [call]
    assert (without.tools, without.tool_names, without.messages) == ([], [], ASK)
