"""Q7: the prompt deadline applies to accepted prompts only, waiting and running (virtual time)."""

from __future__ import annotations

import anyio
import pytest
import trio
import trio.testing

from acp_server.bridge import PromptDeadlineExceededError, PromptQueueFullError, SessionBridge
from acp_server.domain import PromptEnded, TextChunk

from ._support import ScriptedRunner, outcomes, prompt, read_all

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


async def test_virtual_clock_is_in_use() -> None:
    start = trio.current_time()
    await anyio.sleep(3600)
    assert trio.current_time() - start == pytest.approx(3600)


async def test_deadline_while_running_cancels_the_runner() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, prompt_deadline_ms=1000) as bridge:
        session = bridge.create_session("/w")
        start = anyio.current_time()
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        await anyio.sleep(0.5)
        nxt = bridge.send_prompt(session.session_id, prompt("ok:b"))  # due at 1.5 s
        with pytest.raises(PromptDeadlineExceededError) as info:
            await handle.result()
        assert anyio.current_time() - start == pytest.approx(1.0)
        assert info.value.details() == {"sessionId": session.session_id, "deadlineMs": 1000}
        assert info.value.error_kind == "prompt_deadline_exceeded"
        assert runner.cancelled == ["a"]
        events = await read_all(handle.events)
        assert events[:2] == [TextChunk("a/1"), TextChunk("a/2")]
        (ended,) = events[2:]
        assert isinstance(ended, PromptEnded) and ended.error is info.value  # the stream carries the same outcome
        assert await nxt.result() == "end_turn"  # the FIFO goes on
        assert session.pending_prompt_count == 0


async def test_deadline_while_waiting_leaves_the_queue_without_running() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        sid = session.session_id
        start = anyio.current_time()
        blocker = bridge.send_prompt(sid, prompt("a"))
        waiting = bridge.send_prompt(sid, prompt("b"), deadline_ms=500)
        behind = bridge.send_prompt(sid, prompt("ok:c"))
        with pytest.raises(PromptDeadlineExceededError):
            await waiting.result()
        assert anyio.current_time() - start == pytest.approx(0.5)
        assert session.pending_prompt_count == 2
        assert not blocker.done and not behind.done
        (ended,) = await read_all(waiting.events)  # it never ran: its stream is the outcome alone
        assert isinstance(ended, PromptEnded) and isinstance(ended.error, PromptDeadlineExceededError)
        runner.finish("a")
        assert await blocker.result() == "end_turn"
        assert await behind.result() == "end_turn"
        assert runner.started == ["a", "ok:c"]
        assert session.pending_prompt_count == 0


async def test_deadline_counts_from_acceptance_waiting_time_included() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, prompt_deadline_ms=1000) as bridge:
        session = bridge.create_session("/w")
        start = anyio.current_time()
        bridge.send_prompt(session.session_id, prompt("sleep:0.8:a"))
        second = bridge.send_prompt(session.session_id, prompt("b"))
        with pytest.raises(PromptDeadlineExceededError):
            await second.result()
        assert anyio.current_time() - start == pytest.approx(1.0)  # ran 0.2 s, not 1 s
        assert runner.started == ["sleep:0.8:a", "b"]
        assert runner.cancelled == ["b"]


async def test_per_prompt_deadline_can_only_shorten_the_default() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, prompt_deadline_ms=1000) as bridge:
        assert bridge.prompt_deadline_ms == 1000
        session = bridge.create_session("/w")
        sid = session.session_id
        longer = bridge.send_prompt(sid, prompt("a"), deadline_ms=5000)
        assert longer.deadline_ms == 1000
        start = anyio.current_time()
        with pytest.raises(PromptDeadlineExceededError):
            await longer.result()
        assert anyio.current_time() - start == pytest.approx(1.0)
        shorter = bridge.send_prompt(sid, prompt("b"), deadline_ms=200)
        assert shorter.deadline_ms == 200
        start = anyio.current_time()
        with pytest.raises(PromptDeadlineExceededError) as info:
            await shorter.result()
        assert anyio.current_time() - start == pytest.approx(0.2)
        assert info.value.deadline_ms == 200
        assert bridge.send_prompt(sid, prompt("c"), deadline_ms=0).deadline_ms == 1000
        await bridge.aclose()

    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        assert bridge.send_prompt(session.session_id, prompt("d")).deadline_ms is None
        with pytest.raises(ValueError, match="-5"):
            bridge.send_prompt(session.session_id, prompt("e"), deadline_ms=-5)
        assert session.pending_prompt_count == 1
        await bridge.aclose()


async def test_deadline_is_not_an_admission_limit() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, max_pending_prompts_per_session=2, prompt_deadline_ms=1) as bridge:
        session = bridge.create_session("/w")
        sid = session.session_id
        bridge.send_prompt(sid, prompt("a"))
        bridge.send_prompt(sid, prompt("b"))
        with pytest.raises(PromptQueueFullError):  # a short deadline does not make room
            bridge.send_prompt(sid, prompt("c"))
        await anyio.sleep(0.002)
        assert session.pending_prompt_count == 0  # both expired, both released once
        bridge.send_prompt(sid, prompt("ok:d"))
        assert session.pending_prompt_count == 1


async def test_deadline_after_cancel_keeps_the_cancel() -> None:
    """First cause wins: a user cancel before the deadline settles "cancelled", even if unwinding is slow."""

    async def slow_unwind(session: object, p: object, emit: object, client: object = None) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(5)
        raise AssertionError("unreachable")

    async with SessionBridge(slow_unwind, prompt_deadline_ms=1000) as bridge:  # type: ignore[arg-type]
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        await trio.testing.wait_all_tasks_blocked()
        handle.cancel()
        assert await handle.result() == "cancelled"


async def test_cancel_after_the_deadline_keeps_the_deadline() -> None:
    async def slow_unwind(session: object, p: object, emit: object, client: object = None) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(5)
        raise AssertionError("unreachable")

    async with SessionBridge(slow_unwind, prompt_deadline_ms=1000) as bridge:  # type: ignore[arg-type]
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        await anyio.sleep(2)  # deadline hit at 1 s; the runner is still unwinding
        assert not handle.done
        handle.cancel()
        with pytest.raises(PromptDeadlineExceededError):
            await handle.result()


async def test_runner_error_while_cut_short_is_chained() -> None:
    class StreamAborted(Exception):
        pass

    async def converts(session: object, p: object, emit: object, client: object = None) -> str:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise StreamAborted("aborted") from None
        raise AssertionError("unreachable")

    async with SessionBridge(converts, prompt_deadline_ms=100) as bridge:  # type: ignore[arg-type]
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        with pytest.raises(PromptDeadlineExceededError) as info:
            await handle.result()
        assert isinstance(info.value.__cause__, StreamAborted)
        assert [ended.error for ended in outcomes(await read_all(handle.events))] == [info.value]
        assert session.pending_prompt_count == 0
