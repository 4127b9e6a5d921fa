"""The tool loop of ``ModelTurn``: the real SDK over the loopback model, the real tools on ``tmp_path``, a scripted
editor only where someone must be asked. What the model is sent between requests, the order calls run and are
recorded in, what each mode asks, and how the loop ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import pytest

from acp_server.domain import Message, ModelStep, TextChunk, TextContent, ToolCallStarted, ToolCallUpdated, TurnEvent
from acp_server.errors import RemoteError
from acp_server.pipeline import ModelStreamTimeoutError, ModelTransportError, StreamPolicy
from acp_server.provider.offline import (
    Answer,
    HangAfterHeaders,
    LoopbackModel,
    PartialToolCalls,
    RawSSE,
    ScriptedCall,
    ToolCalls,
)
from acp_server.tools import READ_ONLY_TOOLS, TOOL_NAMES
from acp_server.turn import ModelSettings, ModelTurn

from ._tools_support import Editor, Events, Hold, LoopSession, sse_finish, sse_tool_chunk, text_prompt, tool_messages

pytestmark = pytest.mark.anyio

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
GUARD_S = 10  # no test here waits on anything slow: a hang fails fast


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta one\nbeta two\n")
    (tmp_path / "c.txt").write_text("gamma\n")
    return tmp_path


async def run_turn(
    model: LoopbackModel,
    session: LoopSession,
    *,
    client: Editor | None = None,
    policy: StreamPolicy = NO_RETRIES,
    max_turn_requests: int = 50,
    text: str = "go",
) -> tuple[str, Events]:
    settings = ModelSettings(base_url=model.base_url, model="m", policy=policy, max_turn_requests=max_turn_requests)
    runner = ModelTurn(settings)
    emit = Events(session)
    try:
        with anyio.fail_after(GUARD_S):
            return await runner(session, text_prompt(text), emit, client and client.tool_client), emit
    finally:
        await runner.aclose()


# -- what the model is sent -----------------------------------------------------------------------------------


async def test_the_next_request_carries_the_assistant_tool_calls_then_one_tool_message_per_call_in_order(
    model: LoopbackModel, project: Path
) -> None:
    raw_read = '{"path":  "a.txt" }'  # sent back exactly as the model wrote it, odd spacing and all
    calls = (ScriptedCall("read_file", raw_read, id="c1"), ScriptedCall("glob", {"pattern": "*.txt"}, id="c2"))
    model.enqueue(ToolCalls(calls, text="Let me look.", fragment_size=5), Answer(text="done", reasoning=""))
    session = LoopSession(str(project))
    stop, _ = await run_turn(model, session)

    assert stop == "end_turn"
    first, second = model.requests
    [step] = session.answer.steps
    out1, out2 = (record.output for record in step.calls)
    assert "alpha" in out1 and "b.txt" in out2 and "c.txt" in out2
    assert second.messages == [
        *first.messages,
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": raw_read}},
                {"id": "c2", "type": "function", "function": {"name": "glob", "arguments": '{"pattern": "*.txt"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": out1},
        {"role": "tool", "tool_call_id": "c2", "content": out2},
    ]


async def test_a_step_without_text_sends_an_empty_content_and_the_next_prompt_carries_the_whole_turn(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(
        ToolCalls((ScriptedCall("read_file", {"path": "a.txt"}, id="r1"),)),
        ToolCalls((ScriptedCall("read_file", {"path": "c.txt"}, id="r2"),), text="And c."),
        Answer(text="Both read.", reasoning="not sent back"),
        Answer(text="again", reasoning=""),
    )
    session = LoopSession(str(project))
    await run_turn(model, session, text="first")
    await run_turn(model, session, text="second")

    third, fourth = model.requests[2], model.requests[3]
    # a step that streamed no text: "" (strict servers refuse a null or missing content; the loopback model too)
    assert third.messages[-4] == {"role": "assistant", "content": "", "tool_calls": third.messages[-4]["tool_calls"]}
    assert fourth.messages == [
        *third.messages,
        {"role": "assistant", "content": "Both read."},  # the reasoning is not sent back
        {"role": "user", "content": "second"},
    ]


# -- calls in a step ------------------------------------------------------------------------------------------


async def test_parallel_calls_run_one_by_one_in_index_order_and_interleaved_fragments_assemble(
    model: LoopbackModel, project: Path
) -> None:
    calls = tuple(ScriptedCall("read_file", {"path": f"{n}.txt"}, id=f"c{n}") for n in "abc")
    model.enqueue(ToolCalls(calls, fragment_size=3, interleave=True), Answer(text="ok", reasoning=""))
    session = LoopSession(str(project))
    _, emit = await run_turn(model, session)

    shown = [e.call_id for e in emit.events if isinstance(e, ToolCallStarted)]
    assert shown == ["ca", "cb", "cc"]  # each announced once, as its name streamed: all before the first one runs
    first_run = next(i for i, e in enumerate(emit.events) if isinstance(e, ToolCallUpdated) and e.status)
    assert all(not isinstance(e, ToolCallStarted) for e in emit.events[first_run:])
    statuses = [(e.call_id, e.status) for e in emit.events if isinstance(e, ToolCallUpdated) and e.status]
    assert statuses == [
        (f"c{n}", status) for n in "abc" for status in ("in_progress", "completed")
    ]  # each call ends before the next starts
    outputs = tool_messages(model.requests[1].messages)
    assert [call_id for call_id, _ in outputs] == ["ca", "cb", "cc"]
    for (_, output), word in zip(outputs, ("alpha", "beta two", "gamma"), strict=True):
        assert word in output  # each call got its own arguments, whole
    [step] = session.answer.steps
    assert [c.arguments for c in step.calls] == [c.arguments_text for c in calls]


async def test_a_call_streamed_without_an_id_gets_one_used_everywhere(model: LoopbackModel, project: Path) -> None:
    parts = (
        sse_tool_chunk(0, name="read_file"),
        sse_tool_chunk(1, name="read_file"),
        sse_tool_chunk(0, arguments='{"path": "a.txt"}'),
        sse_tool_chunk(1, arguments='{"path": "c.txt"}'),
        sse_finish("tool_calls"),
        "data: [DONE]\n\n",
    )
    model.enqueue(RawSSE(parts), Answer(text="ok", reasoning=""))
    session = LoopSession(str(project))
    _, emit = await run_turn(model, session)

    ids = [c.call_id for c in session.answer.steps[0].calls]
    assert all(i.startswith("call_") and len(i) > 5 for i in ids) and len(set(ids)) == 2
    assistant = model.requests[1].messages[-3]
    assert [c["id"] for c in assistant["tool_calls"]] == ids
    assert [call_id for call_id, _ in tool_messages(model.requests[1].messages)] == ids
    assert emit.started_ids() == ids  # the editor was shown the same ids
    assert [emit.final(i).status for i in ids] == ["completed", "completed"]


async def test_a_request_cut_after_a_fragment_fails_the_turn_and_is_not_replayed(
    model: LoopbackModel, project: Path
) -> None:
    call = ScriptedCall("write_file", {"path": "new.txt", "content": "x"}, id="w1")
    model.enqueue(PartialToolCalls((call,), fragments=1, then="reset"), ToolCalls((call,)), Answer(text="replayed"))
    session = LoopSession(str(project), mode="bypass-permissions")
    with pytest.raises(ModelTransportError) as caught:
        await run_turn(model, session, policy=StreamPolicy())  # retries allowed: only no-replay stops them

    assert caught.value.error_kind == "model_transport_error"
    assert caught.value.details()["phase"] == "mid_stream"
    assert len(model.requests) == 1
    assert not (project / "new.txt").exists()
    assert session.answer == Message("assistant", "", "", None, "failed")
    assert session.recorded_steps == []


# -- records ---------------------------------------------------------------------------------------------------


async def test_steps_are_recorded_as_each_call_ends_and_the_answer_carries_them_all(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(
        ToolCalls(
            (
                ScriptedCall("read_file", {"path": "a.txt"}, id="r1"),
                ScriptedCall("read_file", {"path": "missing.txt"}, id="r2"),
            ),
            text="Two.",
        ),
        ToolCalls((ScriptedCall("list_directory", {"path": "."}, id="l1"),)),
        Answer(text="done", reasoning="thought"),
    )
    session = LoopSession(str(project))
    stop, _ = await run_turn(model, session)

    assert stop == "end_turn"
    r1, r2, l1 = (record for step in session.answer.steps for record in step.calls)
    assert [(r.call_id, r.name, r.status, r.kind) for r in (r1, r2, l1)] == [
        ("r1", "read_file", "completed", "read"),
        ("r2", "read_file", "failed", "read"),  # refused as it was prepared: still the tool's own kind
        ("l1", "list_directory", "completed", "read"),
    ]
    assert r2.output.startswith("Error:") and r2.title == "Read missing.txt — no such path"
    step1, step2 = ModelStep("Two.", "", (r1, r2)), ModelStep("", "", (l1,))
    assert session.recorded_steps == [(ModelStep("Two.", "", (r1,)),), (step1,), (step1, step2)]
    assert session.answer == Message("assistant", "done", "thought", "end_turn", "complete", (step1, step2))
    # Each record follows its call's final update: what is journaled has been shown.
    log = [(kind, value) for kind, value in session.calls if kind in ("steps", "emit")]
    for n, record in enumerate((r1, r2, l1)):
        at = log.index(("steps", session.recorded_steps[n]))
        _, final = log[at - 1]
        assert isinstance(final, ToolCallUpdated) and (final.call_id, final.status) == (record.call_id, record.status)


async def test_max_turn_requests_stops_after_running_the_calls_of_the_last_request(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(ToolCalls((ScriptedCall("read_file", {"path": "a.txt"}, id="r1"),)), Answer(text="never"))
    session = LoopSession(str(project))
    stop, emit = await run_turn(model, session, max_turn_requests=1)

    assert stop == "max_turn_requests"
    assert len(model.requests) == 1
    assert emit.final("r1").status == "completed"  # the calls asked for ran
    answer = session.answer
    assert (answer.content, answer.stop_reason, answer.outcome) == ("", "max_turn_requests", "complete")
    assert [c.call_id for step in answer.steps for c in step.calls] == ["r1"]
    assert not [e for e in emit.events if isinstance(e, TextChunk)]


# -- modes and permission ------------------------------------------------------------------------------------


def write(path: str, call_id: str, content: str = "written\n") -> ScriptedCall:
    return ScriptedCall("write_file", {"path": path, "content": content}, id=call_id)


def command(line: str, call_id: str) -> ScriptedCall:
    return ScriptedCall("run_command", {"command": line}, id=call_id)


async def test_accept_edits_runs_edits_without_asking_but_asks_for_commands(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(ToolCalls((write("new.txt", "w1"), command("touch ran", "x1"))), Answer(text="ok"))
    editor = Editor("reject_once")
    session = LoopSession(str(project), mode="accept-edits")
    _, emit = await run_turn(model, session, client=editor)

    assert (project / "new.txt").read_text() == "written\n"
    assert [call.call_id for call in editor.asked] == ["x1"]
    assert editor.asked[0].kind == "execute"
    assert not (project / "ran").exists()
    assert (emit.final("w1").status, emit.final("x1").status) == ("completed", "failed")
    outputs = dict(tool_messages(model.requests[1].messages))
    assert "declined" in outputs["x1"]
    assert session.permission_rules == {}  # a "once" answer is not remembered


async def test_bypass_never_asks(model: LoopbackModel, project: Path) -> None:
    model.enqueue(ToolCalls((write("new.txt", "w1"), command("touch ran", "x1"))), Answer(text="ok"))
    editor = Editor()  # any request fails the test
    session = LoopSession(str(project), mode="bypass-permissions")
    await run_turn(model, session, client=editor)

    assert (project / "new.txt").exists() and (project / "ran").exists()
    assert editor.asked == []


async def test_read_only_offers_the_read_tools_and_a_write_the_model_makes_anyway_fails_unasked(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(ToolCalls((write("new.txt", "w1"),)), Answer(text="ok"))
    editor = Editor()
    session = LoopSession(str(project), mode="read-only")
    _, emit = await run_turn(model, session, client=editor)

    assert model.requests[0].tool_names == [n for n in TOOL_NAMES if n in READ_ONLY_TOOLS]
    assert not (project / "new.txt").exists() and editor.asked == []
    assert emit.final("w1").status == "failed"
    [(_, output)] = tool_messages(model.requests[1].messages)
    assert "write_file" in output and "not available" in output


async def test_always_answers_are_remembered_per_kind_in_the_session_rules(model: LoopbackModel, project: Path) -> None:
    model.enqueue(
        ToolCalls((write("a.new", "w1"), command("touch ran1", "x1"))),
        ToolCalls((write("b.new", "w2"), command("touch ran2", "x2"))),
        Answer(text="ok"),
    )
    editor = Editor("allow_always", "reject_always")
    session = LoopSession(str(project))
    await run_turn(model, session, client=editor)

    assert [c.call_id for c in editor.asked] == ["w1", "x1"]  # asked once per kind
    assert session.permission_rules == {"edit": True, "execute": False}
    assert (project / "a.new").exists() and (project / "b.new").exists()
    assert not (project / "ran1").exists() and not (project / "ran2").exists()
    outputs = dict(tool_messages(model.requests[2].messages))
    assert "declined" in outputs["x2"]


async def test_a_permission_request_that_fails_is_a_rejection_and_the_loop_goes_on(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(ToolCalls((write("new.txt", "w1"),)), Answer(text="went on"))
    editor = Editor(RemoteError("session/request_permission failed: boom", code=-32603))
    session = LoopSession(str(project))
    stop, emit = await run_turn(model, session, client=editor)

    assert stop == "end_turn" and session.answer.content == "went on"
    assert not (project / "new.txt").exists()
    assert emit.final("w1").status == "failed"
    assert "declined" in dict(tool_messages(model.requests[1].messages))["w1"]
    assert session.permission_rules == {}


async def test_without_a_client_the_default_mode_declines_edits_as_not_askable_and_goes_on(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(
        ToolCalls((write("new.txt", "w1"), ScriptedCall("read_file", {"path": "a.txt"}, id="r1"))),
        Answer(text="went on"),
    )
    session = LoopSession(str(project))
    stop, emit = await run_turn(model, session)

    assert stop == "end_turn"
    assert not (project / "new.txt").exists()
    assert (emit.final("w1").status, emit.final("r1").status) == ("failed", "completed")
    outputs = dict(tool_messages(model.requests[1].messages))
    assert "cannot be asked" in outputs["w1"]
    assert "alpha" in outputs["r1"]


async def test_switching_to_bypass_while_a_call_waits_lets_the_next_call_run_unasked(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(ToolCalls((write("one.new", "w1"), command("touch ran", "x1"))), Answer(text="ok"))
    hold = Hold("allow_once")
    editor = Editor(hold)
    session = LoopSession(str(project))
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(run_turn, model, session, client=editor))
        with anyio.fail_after(GUARD_S):
            await hold.asked.wait()
        session.mode = "bypass-permissions"
        hold.release.set()

    assert (project / "one.new").exists() and (project / "ran").exists()
    assert [c.call_id for c in editor.asked] == ["w1"]


# -- a cancel while a final update waits for the reader ----------------------------------------------------------


class StuckAtFirstFinal(Events):
    """An ``emit`` whose reader is stuck when the first final update of a call comes, and the prompt is cancelled
    right then (so that update was not taken, as with a full stream); afterwards the reader takes events again."""

    def __init__(self, session: LoopSession, scope: anyio.CancelScope) -> None:
        super().__init__(session)
        self.scope = scope
        self.stuck = False

    async def __call__(self, event: TurnEvent) -> None:
        final = isinstance(event, ToolCallUpdated) and event.status in ("completed", "failed")
        if final and not self.stuck:
            self.stuck = True
            self.scope.cancel()
            await anyio.sleep_forever()
        await super().__call__(event)


@pytest.mark.parametrize(
    ("call", "status", "said"),
    [
        (ScriptedCall("no_such_tool", {}, id="c1"), "failed", "unknown tool"),  # refused as it was prepared
        (write("new.txt", "c1"), "failed", "cannot be asked"),  # refused by the mode
        (ScriptedCall("read_file", {"path": "a.txt"}, id="c1"), "completed", "alpha"),  # it ran
    ],
    ids=["unprepared", "refused", "ran"],
)
async def test_a_cancel_while_the_final_update_waits_still_ends_the_call_as_it_ended(
    model: LoopbackModel, project: Path, call: ScriptedCall, status: str, said: str
) -> None:
    model.enqueue(ToolCalls((call,)))
    session = LoopSession(str(project))
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    try:
        with anyio.fail_after(GUARD_S), anyio.CancelScope() as scope:
            emit = StuckAtFirstFinal(session, scope)
            await runner(session, text_prompt("go"), emit)
    finally:
        await runner.aclose()

    assert scope.cancelled_caught
    final = emit.final("c1")  # announced once, ended once: the update the reader missed was sent again
    assert final.status == status and final.content != (TextContent("Cancelled"),)
    answer = session.answer
    assert (answer.outcome, answer.stop_reason) == ("cancelled", "cancelled")
    [record] = [c for step in answer.steps for c in step.calls]
    assert record.status == status and said in record.output


# -- every request of the loop is guarded ----------------------------------------------------------------------


async def test_a_later_request_of_the_loop_that_stalls_before_any_chunk_is_retried_by_the_watchdog(
    model: LoopbackModel, project: Path
) -> None:
    read = ScriptedCall("read_file", {"path": "a.txt"}, id="r1")
    (project / "a.txt").write_text("alpha\n")
    model.enqueue(ToolCalls((read,)), HangAfterHeaders(), Answer(text="after the retry", reasoning=""))
    policy = StreamPolicy(
        idle_timeout_ms=500, stream_max_retries=1, stream_retry_delays_ms=(10,), backoff_max_retries=0
    )
    session = LoopSession(str(project))
    stop, _ = await run_turn(model, session, policy=policy)

    assert stop == "end_turn" and session.answer.content == "after the retry"
    assert len(model.requests) == 3  # the stalled second request was sent again, with the same history
    assert model.requests[2].messages == model.requests[1].messages


async def test_a_later_request_of_the_loop_cut_after_a_fragment_is_not_replayed_and_keeps_the_steps_before(
    model: LoopbackModel, project: Path
) -> None:
    read = ScriptedCall("read_file", {"path": "a.txt"}, id="r1")
    write = ScriptedCall("write_file", {"path": "new.txt", "content": "x"}, id="w1")
    (project / "a.txt").write_text("alpha\n")
    model.enqueue(
        ToolCalls((read,)), PartialToolCalls((write,), fragments=1, then="hold"), ToolCalls((write,)), Answer()
    )
    policy = StreamPolicy(idle_timeout_ms=500, stream_max_retries=2, stream_retry_delays_ms=(10,))
    session = LoopSession(str(project), mode="bypass-permissions")
    with pytest.raises(ModelStreamTimeoutError):
        await run_turn(model, session, policy=policy)

    assert len(model.requests) == 2  # a fragment of the second request reached the turn: no blind replay
    assert not (project / "new.txt").exists()
    assert session.answer.outcome == "failed"
    assert [[c.call_id for c in step.calls] for step in session.answer.steps] == [["r1"]]
