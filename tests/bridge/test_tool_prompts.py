"""Tool-calling prompts through the bridge with the real ``ModelTurn``, the loopback model, the real tools on
``tmp_path`` and a journaled session: what is stored (and read back), what a cancel mid-call leaves, and a mode
switched while a call waits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.bridge import PromptQueueFullError, SessionBridge
from acp_server.domain import PromptEnded, PromptEvent, ToolCallStarted, ToolCallUpdated
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.store import MemorySessionStore, SessionStore, SqliteSessionStore
from acp_server.tools import READ_ONLY_TOOLS, TOOL_NAMES
from acp_server.turn import ModelSettings, ModelTurn

from ..turn._tools_support import Editor, Hold, text_prompt, tool_messages
from ._support import read_all

pytestmark = pytest.mark.anyio

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
GUARD_S = 10


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


@pytest.fixture
async def turn(model: LoopbackModel) -> AsyncIterator[ModelTurn]:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    try:
        yield runner
    finally:
        await runner.aclose()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


def store_of(kind: str, tmp_path: Path) -> SessionStore:
    return SqliteSessionStore(tmp_path / "sessions.db") if kind == "sqlite" else MemorySessionStore()


async def prompt_through(bridge: SessionBridge, session_id: str, text: str, **kwargs: Any) -> list[PromptEvent]:
    handle = bridge.send_prompt(session_id, text_prompt(text), **kwargs)
    with anyio.fail_after(GUARD_S):
        return await read_all(handle.events)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_a_later_prompt_carries_the_whole_tool_turn_from_memory_and_from_the_store(
    kind: str, model: LoopbackModel, turn: ModelTurn, project: Path, tmp_path: Path
) -> None:
    model.enqueue(
        ToolCalls((ScriptedCall("read_file", {"path": "a.txt"}, id="c1"),), text="Let me look."),
        Answer(text="It says alpha.", reasoning="not sent back"),
        Answer(text="second", reasoning=""),
        Answer(text="third", reasoning=""),
    )
    async with store_of(kind, tmp_path) as store:
        async with SessionBridge(turn, store=store) as bridge:
            entry = await bridge.open_session(str(project))
            sid = entry.session_id
            await prompt_through(bridge, sid, "read a.txt")
            await prompt_through(bridge, sid, "and then?")  # its history: the in-memory copy
            in_memory = entry.conversation.messages[1]
        async with SessionBridge(turn, store=store) as bridge:
            _, stored = await bridge.load_session(sid)
            await prompt_through(bridge, sid, "and after?")  # its history: read back from the store

    assert stored[1].to_message() == in_memory  # the steps, records and all, survived the round trip
    [step] = in_memory.steps
    [record] = step.calls
    tool_turn = [
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": record.output},
        {"role": "assistant", "content": "It says alpha."},
    ]
    system = model.requests[0].messages[0]
    assert model.requests[1].messages == [system, *tool_turn[:3]]
    assert model.requests[2].messages == [system, *tool_turn, {"role": "user", "content": "and then?"}]
    assert model.requests[3].messages == [
        *model.requests[2].messages,
        {"role": "assistant", "content": "second"},
        {"role": "user", "content": "and after?"},
    ]


async def test_a_cancel_mid_call_records_the_call_failed_and_the_answer_cancelled_with_the_steps_so_far(
    model: LoopbackModel, turn: ModelTurn, project: Path
) -> None:
    calls = (
        ScriptedCall("read_file", {"path": "a.txt"}, id="r1"),
        ScriptedCall("write_file", {"path": "a.txt", "content": "overwritten\n"}, id="w1"),
        ScriptedCall("read_file", {"path": "a.txt"}, id="r2"),
    )
    model.enqueue(ToolCalls(calls, text="Working."))
    hold = Hold()  # never answered
    async with SessionBridge(turn) as bridge:
        entry = await bridge.open_session(str(project))
        sid = entry.session_id
        handle = bridge.send_prompt(sid, text_prompt("overwrite a.txt"), client=Editor(hold).tool_client)
        events: list[PromptEvent] = []

        async def read() -> None:
            events.extend(await read_all(handle.events))

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            with anyio.fail_after(GUARD_S):
                await hold.asked.wait()
            # While w1 waits, the ended r1 is already journaled (a crash now would lose w1 only).
            snapshot = await bridge.store.read_session(sid)
            assert snapshot is not None
            pending = snapshot.messages[-1]
            assert pending.outcome == "running"
            assert [[c.call_id for c in s.calls] for s in pending.steps] == [["r1"]]
            handle.cancel()
        assert await handle.result() == "cancelled"
        snapshot = await bridge.store.read_session(sid)

    assert snapshot is not None
    answer = snapshot.messages[-1]
    assert (answer.outcome, answer.stop_reason, answer.content) == ("cancelled", "cancelled", "")
    [step] = answer.steps
    assert step.text == "Working."
    r1, w1 = step.calls  # r2 never started
    assert (r1.call_id, r1.status) == ("r1", "completed")
    assert (w1.call_id, w1.name, w1.status, w1.kind) == ("w1", "write_file", "failed", "edit")
    assert "cancelled" in w1.output
    assert entry.conversation.messages[-1] == answer.to_message()  # memory agrees with the store
    assert (project / "a.txt").read_text() == "alpha\n"
    started = [e.call_id for e in events if isinstance(e, ToolCallStarted)]
    assert started == ["r1", "w1", "r2"]  # each shown as the answer streamed it
    finals = [(e.call_id, e.status) for e in events if isinstance(e, ToolCallUpdated) and e.status == "failed"]
    assert finals == [("w1", "failed"), ("r2", "failed")]  # r2 never ran: it ends failed, never left pending
    assert events[-1] == PromptEnded(stop_reason="cancelled")
    assert len(model.requests) == 1


async def test_a_mode_set_on_the_session_while_a_call_waits_is_stored_withdraws_the_request_and_applies_next(
    model: LoopbackModel, turn: ModelTurn, project: Path
) -> None:
    model.enqueue(
        ToolCalls((ScriptedCall("write_file", {"path": "new.txt", "content": "x\n"}, id="w1"),)),
        Answer(text="ok"),
    )
    hold = Hold("allow_once")
    async with SessionBridge(turn) as bridge:
        entry = await bridge.open_session(str(project))
        handle = bridge.send_prompt(entry.session_id, text_prompt("write"), client=Editor(hold).tool_client)
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_all, handle.events)
            with anyio.fail_after(GUARD_S):
                await hold.asked.wait()
            await entry.set_mode("read-only")  # withdraws the pending request: the prompt goes on without it
        assert await handle.result() == "end_turn"
        record = await bridge.store.get_session(entry.session_id)

    assert not hold.release.is_set()  # never answered
    assert not (project / "new.txt").exists()  # the mode wins over the pending request
    assert "write_file" in model.requests[0].tool_names
    assert model.requests[1].tool_names == [n for n in TOOL_NAMES if n in READ_ONLY_TOOLS and n != "skill"]  # no skills
    assert record is not None and record.mode == "read-only"
    [(_, output)] = tool_messages(model.requests[1].messages)
    assert "switched to the 'read-only' mode" in output


async def test_the_whole_tool_loop_is_one_prompt_for_the_queue(
    model: LoopbackModel, turn: ModelTurn, project: Path
) -> None:
    model.enqueue(
        ToolCalls((ScriptedCall("write_file", {"path": "new.txt", "content": "x\n"}, id="w1"),)),
        ToolCalls((ScriptedCall("read_file", {"path": "new.txt"}, id="r1"),)),
        Answer(text="first done", reasoning=""),
        Answer(text="second done", reasoning=""),
    )
    hold = Hold("allow_once")
    async with SessionBridge(turn, max_pending_prompts_per_session=2) as bridge:
        entry = await bridge.open_session(str(project))
        first = bridge.send_prompt(entry.session_id, text_prompt("write then read"), client=Editor(hold).tool_client)
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_all, first.events)
            with anyio.fail_after(GUARD_S):
                await hold.asked.wait()
            second = bridge.send_prompt(entry.session_id, text_prompt("next"))  # queued behind the loop
            assert entry.pending_prompt_count == 2
            with pytest.raises(PromptQueueFullError):  # the waiting loop still counts against the limit
                bridge.send_prompt(entry.session_id, text_prompt("one too many"))
            hold.release.set()
            with anyio.fail_after(GUARD_S):
                events = await read_all(second.events)
        assert await first.result() == "end_turn" and await second.result() == "end_turn"

    # The second prompt's only request came after all three of the first's: its slot was held to the final answer.
    assert len(model.requests) == 4
    assert [m["content"] for m in model.requests[3].messages if m["role"] == "user"][-1] == "next"
    assert any(m.get("role") == "tool" for m in model.requests[3].messages)  # it sees the whole first turn
    assert isinstance(events[-1], PromptEnded)
