"""Q1–Q5: synchronous admission, the limit, cancel, one release per prompt, each prompt's own events (virtual time)."""

from __future__ import annotations

import inspect
import math

import anyio
import pytest
import trio
import trio.testing

from acp_server.bridge import (
    PromptHandle,
    PromptQueueFullError,
    SessionBridge,
    SessionNotFoundError,
)
from acp_server.domain import PromptEnded, TextChunk

from ._support import Boom, ScriptedRunner, history, prompt, read_all

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def send_many(bridge: SessionBridge, session_id: str, names: list[str]) -> list[PromptHandle | Exception]:
    """Plain synchronous code: whatever it returns was decided without a single checkpoint."""
    results: list[PromptHandle | Exception] = []
    for name in names:
        try:
            results.append(bridge.send_prompt(session_id, prompt(name)))
        except (PromptQueueFullError, SessionNotFoundError) as exc:
            results.append(exc)
    return results


async def test_send_prompt_is_not_async() -> None:
    assert not inspect.iscoroutinefunction(SessionBridge.send_prompt)
    assert inspect.iscoroutinefunction(SessionBridge.fork)


async def test_default_limit_is_five_and_the_sixth_is_refused_synchronously() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        assert bridge.limit == 5
        session = bridge.create_session("/w")
        results = send_many(bridge, session.session_id, [f"p{i}" for i in range(7)])
        # Decided before any worker ran: nothing started yet, the count is already 5.
        assert runner.started == []
        assert [type(r) for r in results] == [PromptHandle] * 5 + [PromptQueueFullError] * 2
        assert session.pending_prompt_count == 5
        refusal = results[5]
        assert isinstance(refusal, PromptQueueFullError)
        assert str(refusal) == f'Prompt queue full for session "{session.session_id}" (5/5 pending)'
        assert refusal.details() == {"sessionId": session.session_id, "limit": 5, "pendingCount": 5}
        assert refusal.retryable

        await trio.testing.wait_all_tasks_blocked()
        assert runner.started == ["p0"]  # one running + four waiting is still 5 pending
        assert session.pending_prompt_count == 5
        assert isinstance(send_many(bridge, session.session_id, ["again"])[0], PromptQueueFullError)

        runner.finish("p0")
        await trio.testing.wait_all_tasks_blocked()
        assert session.pending_prompt_count == 4
        (admitted,) = send_many(bridge, session.session_id, ["p5"])
        assert isinstance(admitted, PromptHandle)
        assert session.pending_prompt_count == 5
        await bridge.aclose()


async def test_unknown_session_is_refused_and_counts_nothing() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        other = bridge.create_session("/w")
        with pytest.raises(SessionNotFoundError) as info:
            bridge.send_prompt("nope", prompt("x"))
        assert info.value.details() == {"sessionId": "nope"}
        assert info.value.error_kind == "session_not_found"
        assert other.pending_prompt_count == 0
        await trio.testing.wait_all_tasks_blocked()
        assert runner.started == []


async def test_cancel_after_acceptance_stops_waiting_and_running_prompts() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        first = bridge.send_prompt(session.session_id, prompt("a"))
        second = bridge.send_prompt(session.session_id, prompt("b"))
        third = bridge.send_prompt(session.session_id, prompt("ok:c"))
        await trio.testing.wait_all_tasks_blocked()
        assert runner.started == ["a"]
        second.cancel()
        assert second.done  # waiting: settled synchronously
        first.cancel()
        assert not first.done  # running: its scope is cancelled, it settles once the runner has unwound
        assert session.pending_prompt_count == 2  # "a" unwinding, "ok:c" waiting
        assert await first.result() == "cancelled"
        assert await second.result() == "cancelled"
        assert await third.result() == "end_turn"
        assert runner.started == ["a", "ok:c"]
        assert runner.cancelled == ["a"]
        assert session.pending_prompt_count == 0
        # The waiting one never ran: its stream is the outcome alone; the running one sent what it had.
        assert await read_all(second.events) == [PromptEnded(stop_reason="cancelled")]
        assert await read_all(first.events) == [
            TextChunk("a/1"),
            TextChunk("a/2"),
            PromptEnded(stop_reason="cancelled"),
        ]


@pytest.mark.parametrize("limit", [0, None, math.inf, float("inf")])
async def test_zero_none_and_infinity_mean_unlimited(limit: float | None) -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, max_pending_prompts_per_session=limit) as bridge:
        assert bridge.limit is None
        session = bridge.create_session("/w")
        results = send_many(bridge, session.session_id, [f"p{i}" for i in range(200)])
        assert all(isinstance(r, PromptHandle) for r in results)
        assert session.pending_prompt_count == 200
        await bridge.aclose()
        assert session.pending_prompt_count == 0


async def test_failure_releases_the_slot_once_and_reaches_the_caller() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, max_pending_prompts_per_session=1) as bridge:
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        error = Boom("the model broke")
        await trio.testing.wait_all_tasks_blocked()
        runner.fail("a", error)
        with pytest.raises(Boom) as info:
            await handle.result()
        assert info.value is error
        assert handle.done
        assert await read_all(handle.events) == [TextChunk("a/1"), TextChunk("a/2"), PromptEnded(error=error)]
        assert session.pending_prompt_count == 0
        handle.cancel()  # after the outcome: no second release
        assert session.pending_prompt_count == 0
        with pytest.raises(Boom):
            await handle.result()  # the outcome is stable
        again = bridge.send_prompt(session.session_id, prompt("ok:b"))
        assert await again.result() == "end_turn"
        assert session.pending_prompt_count == 0


async def test_fifo_order_survives_a_failure_in_front() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        sid = session.session_id
        handles = [bridge.send_prompt(sid, prompt(n)) for n in ("fail:a", "ok:b", "c", "fail:d", "ok:e")]
        await trio.testing.wait_all_tasks_blocked()
        assert runner.started == ["fail:a", "ok:b", "c"]
        runner.finish("c")
        with pytest.raises(Boom):
            await handles[0].result()
        assert await handles[1].result() == "end_turn"
        assert await handles[2].result() == "end_turn"
        with pytest.raises(Boom):
            await handles[3].result()
        assert await handles[4].result() == "end_turn"
        assert runner.started == ["fail:a", "ok:b", "c", "fail:d", "ok:e"]
        assert history(session) == [
            "user fail:a",
            "user ok:b",
            "assistant ok:b",
            "user c",
            "assistant c",
            "user fail:d",
            "user ok:e",
            "assistant ok:e",
        ]
        assert session.pending_prompt_count == 0


async def test_one_prompt_at_a_time_per_session_sessions_concurrent() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        one, two = bridge.create_session("/1"), bridge.create_session("/2")
        a1 = bridge.send_prompt(one.session_id, prompt("a1"))
        a2 = bridge.send_prompt(one.session_id, prompt("a2"))
        b1 = bridge.send_prompt(two.session_id, prompt("b1"))
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(runner.started) == ["a1", "b1"]
        assert one.running is a1 and two.running is b1
        runner.finish("a1")
        await trio.testing.wait_all_tasks_blocked()
        assert one.running is a2
        runner.finish("a2")
        runner.finish("b1")
        assert [await h.result() for h in (a1, a2, b1)] == ["end_turn"] * 3
        assert [entry.running for entry in (one, two)] == [None, None]


async def test_each_prompt_gets_its_own_events_in_order_then_its_outcome() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        h1 = bridge.send_prompt(session.session_id, prompt("ok:a"))
        h2 = bridge.send_prompt(session.session_id, prompt("fail:b"))
        h3 = bridge.send_prompt(session.session_id, prompt("ok:c"))
        assert await h1.result() == "end_turn"
        with pytest.raises(Boom):
            await h2.result()
        assert await h3.result() == "end_turn"
        assert await read_all(h1.events) == [TextChunk("ok:a/1"), TextChunk("ok:a/2"), PromptEnded("end_turn")]
        second = await read_all(h2.events)
        assert second[:2] == [TextChunk("fail:b/1"), TextChunk("fail:b/2")]
        (ended,) = second[2:]
        assert isinstance(ended, PromptEnded) and ended.stop_reason is None and isinstance(ended.error, Boom)
        assert await read_all(h3.events) == [TextChunk("ok:c/1"), TextChunk("ok:c/2"), PromptEnded("end_turn")]
        assert await read_all(h1.events) == []  # read to its end: nothing more, ever


async def test_cancel_waiting_leaves_the_fifo_and_releases_at_once() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, max_pending_prompts_per_session=2) as bridge:
        session = bridge.create_session("/w")
        sid = session.session_id
        running = bridge.send_prompt(sid, prompt("a"))
        waiting = bridge.send_prompt(sid, prompt("b"))
        await trio.testing.wait_all_tasks_blocked()
        waiting.cancel()
        assert waiting.done
        assert session.pending_prompt_count == 1
        waiting.cancel()
        assert session.pending_prompt_count == 1
        later = bridge.send_prompt(sid, prompt("ok:c"))  # the slot is free again
        assert await waiting.result() == "cancelled"
        runner.finish("a")
        assert await running.result() == "end_turn"
        assert await later.result() == "end_turn"
        assert runner.started == ["a", "ok:c"]  # "b" never ran
        assert session.pending_prompt_count == 0


async def test_cancel_session_stops_the_running_prompt_and_every_waiting_one_and_none_of_them_starts() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        sid = session.session_id
        assert bridge.cancel_session(sid) is False  # nothing pending
        running = bridge.send_prompt(sid, prompt("a"))
        waiting = [bridge.send_prompt(sid, prompt(f"ok:{name}")) for name in "bc"]
        await trio.testing.wait_all_tasks_blocked()
        assert bridge.cancel_session(sid) is True
        assert all(handle.done for handle in waiting)  # at once: they never reach the runner
        assert [await handle.result() for handle in (running, *waiting)] == ["cancelled"] * 3
        await trio.testing.wait_all_tasks_blocked()
        assert runner.started == ["a"] and runner.cancelled == ["a"]
        assert session.pending_prompt_count == 0
        after = bridge.send_prompt(sid, prompt("ok:d"))  # the session goes on: what is sent next runs
        assert await after.result() == "end_turn"
        assert runner.started == ["a", "ok:d"]
        with pytest.raises(SessionNotFoundError):
            bridge.cancel_session("nope")


async def test_cancel_session_with_only_waiting_prompts_cancels_them_before_any_starts() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        sid = bridge.create_session("/w").session_id
        handles = [bridge.send_prompt(sid, prompt(f"ok:{name}")) for name in "ab"]
        assert bridge.cancel_session(sid) is True  # the worker has not taken the first one yet
        assert [await handle.result() for handle in handles] == ["cancelled", "cancelled"]
        await trio.testing.wait_all_tasks_blocked()
        assert runner.started == []


async def test_running_prompt_releases_only_after_it_unwound() -> None:
    """A cancelled running prompt keeps its slot until the runner has left (it may still write history)."""
    unwound = anyio.Event()

    async def slow_to_stop(session: object, p: object, emit: object, client: object = None) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(1)
            unwound.set()
        raise AssertionError("unreachable")

    async with SessionBridge(slow_to_stop, max_pending_prompts_per_session=1) as bridge:  # type: ignore[arg-type]
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        await trio.testing.wait_all_tasks_blocked()
        handle.cancel()
        assert not handle.done
        assert session.pending_prompt_count == 1
        with pytest.raises(PromptQueueFullError):
            bridge.send_prompt(session.session_id, prompt("b"))
        assert await handle.result() == "cancelled"
        assert unwound.is_set()
        assert session.pending_prompt_count == 0


async def test_runner_that_swallows_cancel_still_settles_cancelled() -> None:
    async def stubborn(session: object, p: object, emit: object, client: object = None) -> str:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            pass  # swallows cancellation (a bad runner): the bridge's cause still decides
        return "end_turn"

    async with SessionBridge(stubborn) as bridge:  # type: ignore[arg-type]
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        await trio.testing.wait_all_tasks_blocked()
        handle.cancel()
        assert await handle.result() == "cancelled"
        assert session.pending_prompt_count == 0


async def test_result_awaiter_cancelled_does_not_cancel_the_prompt() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("a"))
        with anyio.move_on_after(1):
            await handle.result()
        assert not handle.done
        runner.finish("a", "max_tokens")
        assert await handle.result() == "max_tokens"


async def test_broken_runner_returning_none_fails_only_its_prompt() -> None:
    calls: list[str] = []

    async def broken(session: object, p: object, emit: object, client: object = None) -> None:
        calls.append("called")

    async with SessionBridge(broken) as bridge:  # type: ignore[arg-type]
        session = bridge.create_session("/w")
        first = bridge.send_prompt(session.session_id, prompt("a"))
        second = bridge.send_prompt(session.session_id, prompt("b"))
        for handle in (first, second):
            with pytest.raises(TypeError, match="returned None"):
                await handle.result()
        assert calls == ["called", "called"]
        assert session.pending_prompt_count == 0
