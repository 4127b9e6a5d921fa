"""The tool loop stays bounded and well formed whatever the model streams: too many calls, huge or deeply nested
arguments, duplicated or missing ids and names, text UTF-8 cannot carry."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from acp_server.domain import Message, ModelStep, ToolCallRecord, ToolCallStarted, ToolCallUpdated
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import MAX_ARGUMENTS_BYTES
from acp_server.turn import ModelSettings, ModelTurn
from acp_server.turn._calls import MAX_CALLS_PER_ANSWER

from ._tools_support import Events, LoopSession, text_prompt, tool_messages

pytestmark = pytest.mark.anyio

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


async def run(model: LoopbackModel, session: LoopSession) -> tuple[str, Events]:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    emit = Events(session)
    try:
        with anyio.fail_after(20):
            return await runner(session, text_prompt("go"), emit, None), emit
    finally:
        await runner.aclose()


def _started(events: Events) -> list[ToolCallStarted]:
    return [e for e in events.events if isinstance(e, ToolCallStarted)]


def _raw_inputs(events: Events) -> dict[str, object]:
    """Each call's ``rawInput`` as the editor ends up showing it (announced, then updated)."""
    shown: dict[str, object] = {}
    for e in events.events:
        if isinstance(e, ToolCallStarted | ToolCallUpdated) and (e.raw_input is not None or e.call_id not in shown):
            shown[e.call_id] = e.raw_input
    return shown


async def test_an_answer_with_too_many_calls_runs_the_first_ones_and_tells_the_model(
    model: LoopbackModel, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    many = tuple(ScriptedCall("read_file", {"path": "a.txt"}, id=f"c{i}") for i in range(MAX_CALLS_PER_ANSWER + 36))
    model.enqueue(ToolCalls(many, fragment_size=None), Answer(text="ok", reasoning=""))
    session = LoopSession(str(tmp_path))
    assert (await run(model, session))[0] == "end_turn"
    messages = tool_messages(model.requests[1].messages)
    assert [call_id for call_id, _ in messages] == [f"c{i}" for i in range(MAX_CALLS_PER_ANSWER)]
    assert f"asked for {MAX_CALLS_PER_ANSWER + 36} tool calls" in messages[-1][1]
    assistant = next(m for m in model.requests[1].messages if m.get("tool_calls"))
    assert len(assistant["tool_calls"]) == MAX_CALLS_PER_ANSWER  # every call sent back has its tool message


async def test_arguments_past_the_limit_are_not_kept_shown_or_sent_back(model: LoopbackModel, tmp_path: Path) -> None:
    huge = json.dumps({"path": "x" * (MAX_ARGUMENTS_BYTES + 10)})
    model.enqueue(ToolCalls((ScriptedCall("read_file", huge, id="big"),), fragment_size=65536), Answer(text="ok"))
    session = LoopSession(str(tmp_path))
    _, events = await run(model, session)
    assert _raw_inputs(events) == {"big": None}  # never shown, neither while it streamed nor after
    [(call_id, output)] = tool_messages(model.requests[1].messages)
    assert call_id == "big" and "too large" in output
    assistant = next(m for m in model.requests[1].messages if m.get("tool_calls"))
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"  # the huge text is never re-sent
    assert len(json.dumps(model.requests[1].body)) < 100_000
    [step] = session.answer.steps
    assert step.calls[0].arguments == "{}"


async def test_duplicated_or_reused_ids_get_fresh_ones_and_a_nameless_call_is_stored_with_a_name(
    model: LoopbackModel, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    old = ToolCallRecord("used", "read_file", "{}", "x", "completed", "Read a.txt", "read")
    history = [Message("user", "before"), Message("assistant", "", steps=(ModelStep("", "", (old,)),))]
    calls = (
        ScriptedCall("read_file", {"path": "a.txt"}, id="dup"),
        ScriptedCall("read_file", {"path": "a.txt"}, id="dup"),
        ScriptedCall("read_file", {"path": "a.txt"}, id="used"),
        ScriptedCall("", {}, id="noname"),
    )
    model.enqueue(ToolCalls(calls), Answer(text="ok"))
    session = LoopSession(str(tmp_path), history=history)
    _, events = await run(model, session)
    ids = [s.call_id for s in _started(events)]
    assert ids[0] == "dup" and ids[3] == "noname"
    assert len(set(ids)) == 4 and "used" not in ids  # one card per id in the editor, across the session
    finals = [e for e in events.events if isinstance(e, ToolCallUpdated) and e.status in ("completed", "failed")]
    assert [f.call_id for f in finals] == ids
    assistant = [m for m in model.requests[1].messages if m.get("tool_calls")][-1]
    assert [c["id"] for c in assistant["tool_calls"]] == ids
    assert all(c["function"]["name"] for c in assistant["tool_calls"])  # providers refuse an empty name


async def test_deeply_nested_or_unpaired_surrogate_arguments_fail_one_call_not_the_prompt(
    model: LoopbackModel, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    calls = (
        ScriptedCall("read_file", "[" * 200_000, id="deep"),
        ScriptedCall("grep", '{"pattern": "\\ud800"}', id="surrogate"),
        ScriptedCall("read_file", {"path": "a.txt"}, id="fine"),
    )
    model.enqueue(ToolCalls(calls, fragment_size=None), Answer(text="still here", reasoning=""))
    session = LoopSession(str(tmp_path))
    stop, events = await run(model, session)
    assert stop == "end_turn"
    shown = _raw_inputs(events)
    assert shown["deep"] is None
    raw = shown["surrogate"]
    assert isinstance(raw, dict) and raw["pattern"] == "\ufffd"  # shown without text UTF-8 cannot carry
    outputs = dict(tool_messages(model.requests[1].messages))
    assert outputs["deep"].startswith("Error:") and "alpha" in outputs["fine"]


async def test_arguments_with_nan_are_refused_and_never_shown(model: LoopbackModel, tmp_path: Path) -> None:
    nan = '{"path": "a.txt", "offset": NaN}'  # Python's parser takes it; no face could send it on as JSON
    model.enqueue(ToolCalls((ScriptedCall("read_file", nan, id="n"),), fragment_size=None), Answer(text="ok"))
    session = LoopSession(str(tmp_path))
    _, events = await run(model, session)
    assert _raw_inputs(events) == {"n": None}
    [(call_id, output)] = tool_messages(model.requests[1].messages)
    assert call_id == "n" and "NaN is not a JSON value" in output
