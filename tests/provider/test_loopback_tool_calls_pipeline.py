"""Tool calls from the loopback model through the project's pipeline (``stream_chat`` over the real SDK client and
real sockets, on trio's virtual clock): the fragments reassemble into exactly the scripted calls, a request that
delivered a fragment is never replayed, and the unscripted model runs a whole read_file loop on a real file."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import openai
import pytest

from acp_server.pipeline import (
    ChatRequest,
    Delta,
    Finished,
    ModelStreamTimeoutError,
    ModelTransportError,
    ModelTurnError,
    StreamEvent,
    StreamPolicy,
    ToolCallFragment,
    stream_chat,
)
from acp_server.provider import make_openai_client
from acp_server.provider.offline import Answer, LoopbackModel, PartialToolCalls, ScriptedCall, ToolCalls

pytestmark = [
    pytest.mark.anyio,
    # A response closed before the end of its body leaves httpcore2's byte generator to the garbage collector,
    # which warns on trio (see tests/pipeline/test_loopback_fast_path.py).
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    pytest.mark.virtual_time(autojump=0.05),
]

POLICY = StreamPolicy(jitter_source=lambda: 0.5, idle_timeout_ms=5_000)
GUARD_S = 3600  # a virtual-time deadline: a hung test fails at once
READ_FILE: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file of the project.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}


@asynccontextmanager
async def running() -> AsyncIterator[tuple[LoopbackModel, openai.AsyncOpenAI]]:
    async with LoopbackModel() as model, make_openai_client(base_url=model.base_url, api_key=None) as client:
        yield model, client


async def events_of(client: openai.AsyncOpenAI, messages: list[Any]) -> list[StreamEvent]:
    request = ChatRequest(model="m", messages=messages, extra={"tools": [READ_FILE]})
    with anyio.fail_after(GUARD_S):
        async with aclosing(stream_chat(client, request, POLICY)) as stream:
            return [event async for event in stream]


def fragments_of(events: list[StreamEvent]) -> list[ToolCallFragment]:
    return [f for e in events if isinstance(e, Delta) for f in e.tool_calls]


def assemble(fragments: list[ToolCallFragment]) -> list[tuple[int, str | None, str | None, str]]:
    """``(index, id, name, arguments)`` per call as the agent assembles them: by index, first id and name win."""
    calls: dict[int, list[Any]] = {}
    for f in fragments:
        call = calls.setdefault(f.index, [f.id, f.name, ""])
        call[0], call[1] = call[0] or f.id, call[1] or f.name
        call[2] += f.arguments
    return [(i, *calls[i]) for i in sorted(calls)]


ASK: list[Any] = [{"role": "user", "content": "go"}]
CALLS = (
    ScriptedCall("read_file", {"path": "src/app.py", "limit": 20}, id="call_r"),
    ScriptedCall("edit_file", {"path": "a.py", "old_text": "x = 1\n", "new_text": "x = 2\n"}, id="call_e"),
    ScriptedCall("no_such_tool", {"q": "«ünïcode» ☃"}, id="call_u"),
    ScriptedCall("run_command", '{"command": "ls", "timeout_ms": ', id="call_m"),  # malformed
)


@pytest.mark.parametrize(
    ("fragment_size", "interleave"), [(1, False), (7, False), (7, True), (None, False), (None, True)]
)
async def test_fragments_reassemble_into_exactly_the_scripted_calls(
    fragment_size: int | None, interleave: bool
) -> None:
    async with running() as (model, client):
        model.enqueue(ToolCalls(CALLS, text="On it.", fragment_size=fragment_size, interleave=interleave))
        events = await events_of(client, ASK)
    fragments = fragments_of(events)
    expected = [(i, c.id, c.name, c.arguments_text) for i, c in enumerate(CALLS)]
    assert assemble(fragments) == expected
    assert "".join(e.text for e in events if isinstance(e, Delta)) == "On it."
    assert events[-1] == Finished("tool_calls")
    heads = [f for f in fragments if f.id is not None]
    assert [(f.index, f.name) for f in heads] == [(i, c.name) for i, c in enumerate(CALLS)]  # one head per call
    if fragment_size is not None:
        assert len(fragments) > 2 * len(CALLS)
        assert all(f.arguments == "" for f in heads)
        assert all(len(f.arguments) <= fragment_size and f.name is None for f in fragments if f.id is None)
    else:
        assert fragments == heads


async def test_rounds_of_calls_are_played_in_order_then_the_default_answers() -> None:
    async with running() as (model, client):
        model.enqueue(
            ToolCalls((ScriptedCall("glob", {"pattern": "*.md"}, id="g"),)),
            ToolCalls((ScriptedCall("grep", {"pattern": "TODO"}, id="s"),)),
            Answer(text="done", reasoning=""),
        )
        rounds = [assemble(fragments_of(await events_of(client, ASK))) for _ in range(3)]
        last = await events_of(client, [{"role": "user", "content": "hi"}])
    assert rounds == [[(0, "g", "glob", '{"pattern": "*.md"}')], [(0, "s", "grep", '{"pattern": "TODO"}')], []]
    assert "".join(e.text for e in last if isinstance(e, Delta)) == "You said: hi"


@pytest.mark.parametrize(
    ("then", "error"),
    [("reset", ModelTransportError), ("end", ModelTransportError), ("hold", ModelStreamTimeoutError)],
)
async def test_a_request_that_delivered_a_fragment_is_not_replayed(
    then: Literal["hold", "end", "reset"], error: type[ModelTurnError]
) -> None:
    events: list[StreamEvent] = []
    async with running() as (model, client):
        model.enqueue(PartialToolCalls(CALLS[:1], fragments=2, then=then), ToolCalls(CALLS[1:2]))
        request = ChatRequest(model="m", messages=ASK, extra={"tools": [READ_FILE]})
        with anyio.fail_after(GUARD_S), pytest.raises(error) as raised:
            async with aclosing(stream_chat(client, request, POLICY)) as stream:
                async for event in stream:
                    events.append(event)
        assert len(model.requests) == 1
    assert fragments_of(events) == [
        ToolCallFragment(0, "call_r", "read_file", ""),
        ToolCallFragment(0, None, None, '{"path": "src/ap'),
    ]
    assert (raised.value.attempts, raised.value.phase) == (1, "mid_stream")


def cat_n(path: Path) -> str:
    """A read_file result in ``cat -n`` style, then the total."""
    lines = path.read_text().splitlines()
    return "".join(f"{n:6}\t{line}\n" for n, line in enumerate(lines, 1)) + f"\n({len(lines)} lines)"


def raw(path: Path) -> str:
    return path.read_text()


def run_read_file(cwd: Path, arguments: str, render: Any) -> str:
    """The agent's side of one read_file call, on a real file: the rendered content, or the error."""
    target = cwd / json.loads(arguments)["path"]
    try:
        return str(render(target))
    except OSError as exc:
        return f"Error: cannot read {target.name}: {exc.strerror}"


@pytest.mark.parametrize(
    ("render", "answer"),
    [
        (cat_n, "README.md has 4 lines. Its first line is: “# acp-server”."),
        (raw, "README.md has 4 lines. Its first line is: “# acp-server”."),
        (None, "I could not read README.md: “Error: cannot read README.md: No such file or directory”."),
    ],
)
async def test_the_unscripted_model_runs_a_read_file_loop_on_a_real_file(
    tmp_path: Path, render: Any, answer: str
) -> None:
    if render is not None:
        (tmp_path / "README.md").write_text("# acp-server\n\nAn ACP agent server.\nMore.\n")
    render = render or raw
    messages: list[Any] = [{"role": "user", "content": "what is in `README.md`?"}]
    async with running() as (model, client):
        for _ in range(5):  # an agent's loop, bounded: the model must answer in text by then
            events = await events_of(client, messages)
            calls = assemble(fragments_of(events))
            if not calls:
                break
            assert events[-1] == Finished("tool_calls")
            tool_calls = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                for _, call_id, name, arguments in calls
            ]
            messages.append({"role": "assistant", "content": "", "tool_calls": tool_calls})
            for _, call_id, _, arguments in calls:
                content = run_read_file(tmp_path, arguments, render)
                messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        requests = model.requests
    assert [r.tool_names for r in requests] == [["read_file"], ["read_file"]]
    function = {"name": "read_file", "arguments": '{"path": "README.md"}'}
    call = {"id": "call_loopback_0_0", "type": "function", "function": function}
    assert requests[1].messages[1]["tool_calls"] == [call]
    assert "".join(e.text for e in events if isinstance(e, Delta)) == answer
    assert events[-1] == Finished("stop")
