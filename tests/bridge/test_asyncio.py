"""The same rules on asyncio (the shared conftest's default backend), real time kept to a few milliseconds."""

from __future__ import annotations

import anyio
import pytest

from acp_server.bridge import (
    BridgeClosedError,
    PromptDeadlineExceededError,
    PromptHandle,
    PromptQueueFullError,
    SessionBridge,
    SessionClosedError,
    SessionEntry,
)
from acp_server.domain import PromptEnded, PromptEvent, TextChunk

from ._support import Boom, ScriptedRunner, history, prompt

pytestmark = pytest.mark.anyio


async def test_admission_failure_and_fifo_on_asyncio() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, max_pending_prompts_per_session=3) as bridge:
        session = bridge.create_session("/w")
        sid = session.session_id
        handles = [bridge.send_prompt(sid, prompt(n)) for n in ("fail:a", "b", "ok:c")]
        with pytest.raises(PromptQueueFullError):
            bridge.send_prompt(sid, prompt("d"))
        with pytest.raises(Boom):
            await handles[0].result()
        await anyio.wait_all_tasks_blocked()
        assert session.pending_prompt_count == 2
        handles[1].cancel()  # running: its scope is cancelled
        assert await handles[1].result() == "cancelled"
        assert await handles[2].result() == "end_turn"
        assert runner.started == ["fail:a", "b", "ok:c"]
        assert session.pending_prompt_count == 0


async def test_streams_with_backpressure_on_asyncio() -> None:
    """Capacity 1: each turn's second event waits for its reader; both readers still get everything in order."""
    runner = ScriptedRunner()
    async with SessionBridge(runner, stream_capacity=1) as bridge:
        session = bridge.create_session("/w")
        first = bridge.send_prompt(session.session_id, prompt("ok:a"))
        second = bridge.send_prompt(session.session_id, prompt("ok:b"))
        await anyio.wait_all_tasks_blocked()
        assert runner.started == ["ok:a"]  # blocked on its second event: nobody reads yet
        assert first.events.buffered == 1 and not first.done
        got: dict[str, list[PromptEvent]] = {"a": [], "b": []}

        async def read(key: str, handle: PromptHandle) -> None:
            async for event in handle.events:
                got[key].append(event)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read, "b", second)
            tg.start_soon(read, "a", first)
        assert got == {
            "a": [TextChunk("ok:a/1"), TextChunk("ok:a/2"), PromptEnded("end_turn")],
            "b": [TextChunk("ok:b/1"), TextChunk("ok:b/2"), PromptEnded("end_turn")],
        }
        assert runner.finished == ["ok:a", "ok:b"]


async def test_cancel_waiting_and_close_session_on_asyncio() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        sid = session.session_id
        running = bridge.send_prompt(sid, prompt("a"))
        waiting = bridge.send_prompt(sid, prompt("b"))
        doomed = bridge.send_prompt(sid, prompt("c"))
        await anyio.wait_all_tasks_blocked()
        waiting.cancel()
        assert await waiting.result() == "cancelled"
        await bridge.close_session(sid)
        for handle in (running, doomed):
            with pytest.raises(SessionClosedError):
                await handle.result()
        assert runner.cancelled == ["a"]
        assert session.pending_prompt_count == 0


async def test_fork_on_asyncio() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, max_pending_prompts_per_session=1) as bridge:
        source = bridge.create_session("/src")
        bridge.send_prompt(source.session_id, prompt("a"))
        forked: list[SessionEntry] = []

        async def do_fork() -> None:
            forked.append(await bridge.fork(source.session_id))

        async with anyio.create_task_group() as tg:
            tg.start_soon(do_fork)
            await anyio.wait_all_tasks_blocked()
            assert forked == []
            runner.finish("a")
        assert history(forked[0]) == ["user a", "assistant a"]


async def test_deadlines_on_asyncio() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, prompt_deadline_ms=30) as bridge:
        session = bridge.create_session("/w")
        running = bridge.send_prompt(session.session_id, prompt("a"))
        waiting = bridge.send_prompt(session.session_id, prompt("b"), deadline_ms=10)
        with pytest.raises(PromptDeadlineExceededError):
            await waiting.result()
        assert runner.started == ["a"]
        with pytest.raises(PromptDeadlineExceededError):
            await running.result()
        assert runner.cancelled == ["a"]
        assert session.pending_prompt_count == 0


async def test_shutdown_on_asyncio() -> None:
    runner = ScriptedRunner()
    with anyio.CancelScope() as host:
        async with SessionBridge(runner) as bridge:
            session = bridge.create_session("/w")
            running = bridge.send_prompt(session.session_id, prompt("a"))
            waiting = bridge.send_prompt(session.session_id, prompt("b"))
            await anyio.wait_all_tasks_blocked()
            host.cancel()
            await anyio.sleep_forever()
    for handle in (running, waiting):
        with pytest.raises(BridgeClosedError):
            await handle.result()
    assert session.pending_prompt_count == 0

    with pytest.raises(KeyError):  # a body error comes out as itself, not wrapped in a group
        async with SessionBridge(runner) as bridge:
            session = bridge.create_session("/w")
            handle = bridge.send_prompt(session.session_id, prompt("c"))
            await anyio.wait_all_tasks_blocked()
            raise KeyError("body")
    with pytest.raises(BridgeClosedError):
        await handle.result()
