"""Q6 fork behind the FIFO; close_session; the bridge's lifecycle (virtual time)."""

from __future__ import annotations

import re

import anyio
import pytest
import trio
import trio.testing

from acp_server.bridge import (
    BridgeClosedError,
    SessionAlreadyExistsError,
    SessionBridge,
    SessionClosedError,
    SessionEntry,
    SessionNotFoundError,
)
from acp_server.domain import Conversation, Message, PromptEnded

from ._support import ScriptedRunner, history, prompt, read_all

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


# -- fork ----------------------------------------------------------------------------------------------------


async def test_fork_waits_for_the_prompts_queued_before_it() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner, max_pending_prompts_per_session=2) as bridge:
        source = bridge.create_session("/src")
        sid = source.session_id
        bridge.send_prompt(sid, prompt("a"))
        bridge.send_prompt(sid, prompt("b"))
        forked: list[SessionEntry] = []

        async def do_fork() -> None:
            forked.append(await bridge.fork(sid))

        async with anyio.create_task_group() as tg:
            tg.start_soon(do_fork)
            await trio.testing.wait_all_tasks_blocked()
            # Not counted, never refused: the queue is full (2/2) and the fork still waits its turn.
            assert source.pending_prompt_count == 2
            assert forked == []
            runner.finish("a")
            await trio.testing.wait_all_tasks_blocked()
            assert forked == []
            runner.finish("b")
        (child,) = forked
        assert child.session_id != sid
        assert child.cwd == "/src"
        assert history(child) == ["user a", "assistant a", "user b", "assistant b"]
        assert child.pending_prompt_count == 0
        assert child.conversation is not source.conversation
        assert child.title == source.title == "a"
        assert bridge.get(child.session_id) is child


async def test_prompt_queued_after_the_fork_is_not_in_the_copy() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        source = bridge.create_session("/src")
        sid = source.session_id
        bridge.send_prompt(sid, prompt("a"))
        forked: list[SessionEntry] = []

        async def do_fork() -> None:
            forked.append(await bridge.fork(sid, cwd="/elsewhere"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(do_fork)
            await trio.testing.wait_all_tasks_blocked()
            after = bridge.send_prompt(sid, prompt("ok:after"))
            runner.finish("a")
        assert await after.result() == "end_turn"
        (child,) = forked
        assert child.cwd == "/elsewhere"
        assert history(child) == ["user a", "assistant a"]
        assert history(source)[-1] == "assistant ok:after"


async def test_fork_of_an_idle_session_copies_the_conversation() -> None:
    async with SessionBridge(ScriptedRunner()) as bridge:
        source = bridge.create_session("/src", conversation=Conversation([Message("user", "hi")]))
        child = await bridge.fork(source.session_id)
        child.conversation.messages.append(Message("assistant", "only in the child"))
        assert history(source) == ["user hi"]
        assert history(child) == ["user hi", "assistant only in the child"]
        with pytest.raises(SessionNotFoundError):
            await bridge.fork("nope")


async def test_fork_caller_cancelled_leaves_the_fifo_and_forks_nothing() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        source = bridge.create_session("/src")
        bridge.send_prompt(source.session_id, prompt("a"))
        with anyio.move_on_after(1):
            await bridge.fork(source.session_id)
        runner.finish("a")
        await trio.testing.wait_all_tasks_blocked()
        assert bridge.sessions == (source,)


async def test_fork_waiting_when_the_session_closes_raises_session_closed() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        source = bridge.create_session("/src")
        bridge.send_prompt(source.session_id, prompt("a"))
        outcome: list[BaseException] = []

        async def do_fork() -> None:
            try:
                await bridge.fork(source.session_id)
            except SessionClosedError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(do_fork)
            await trio.testing.wait_all_tasks_blocked()
            await bridge.close_session(source.session_id)
        assert len(outcome) == 1
        assert bridge.sessions == ()


# -- close_session -------------------------------------------------------------------------------------------


async def test_close_session_settles_running_and_waiting_with_session_closed() -> None:
    runner = ScriptedRunner()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        other = bridge.create_session("/other")
        sid = session.session_id
        running = bridge.send_prompt(sid, prompt("a"))
        waiting = bridge.send_prompt(sid, prompt("b"))
        unaffected = bridge.send_prompt(other.session_id, prompt("ok:x"))
        await trio.testing.wait_all_tasks_blocked()
        await bridge.close_session(sid)
        assert running.done and waiting.done  # close_session returned after the runner unwound
        for handle in (running, waiting):
            with pytest.raises(SessionClosedError) as info:
                await handle.result()
            assert info.value.details() == {"sessionId": sid}
            assert info.value.error_kind == "session_closed"
            ended = (await read_all(handle.events))[-1]
            assert isinstance(ended, PromptEnded) and ended.error is info.value
        assert runner.cancelled == ["a"]
        assert session.pending_prompt_count == 0
        assert session.closed
        assert await unaffected.result() == "end_turn"
        with pytest.raises(SessionNotFoundError):
            bridge.get(sid)
        with pytest.raises(SessionNotFoundError):
            bridge.send_prompt(sid, prompt("c"))
        with pytest.raises(SessionNotFoundError):
            await bridge.close_session(sid)


async def test_close_idle_session() -> None:
    async with SessionBridge(ScriptedRunner()) as bridge:
        session = bridge.create_session("/w", session_id="fixed")
        await bridge.close_session("fixed")
        assert session.closed
        again = bridge.create_session("/w", session_id="fixed")  # the id is free again
        assert again is not session


# -- sessions ------------------------------------------------------------------------------------------------


async def test_create_session_ids() -> None:
    async with SessionBridge(ScriptedRunner()) as bridge:
        entry = bridge.create_session("/w")
        assert re.fullmatch(r"[0-9a-f]{32}", entry.session_id)
        assert entry.cwd == "/w"
        assert entry.conversation.messages == []
        assert entry.pending_prompt_count == 0 and entry.running is None
        assert entry.created_at == entry.updated_at
        assert entry.title == ""
        bridge.create_session("/w", session_id="mine")
        with pytest.raises(SessionAlreadyExistsError) as info:
            bridge.create_session("/x", session_id="mine")
        assert info.value.details() == {"sessionId": "mine"}
        assert bridge.get("mine").cwd == "/w"
        assert [s.session_id for s in bridge.sessions] == [entry.session_id, "mine"]


async def test_title_comes_from_the_first_prompt() -> None:
    async with SessionBridge(ScriptedRunner()) as bridge:
        entry = bridge.create_session("/w")
        h = bridge.send_prompt(entry.session_id, prompt("ok:first line\nsecond"))
        bridge.send_prompt(entry.session_id, prompt("ok:another"))
        await h.result()
        assert entry.title == "ok:first line"
        assert entry.updated_at >= entry.created_at


# -- lifecycle -----------------------------------------------------------------------------------------------


async def test_unopened_bridge_refuses_use() -> None:
    bridge = SessionBridge(ScriptedRunner())
    with pytest.raises(RuntimeError, match="not open"):
        bridge.create_session("/w")
    with pytest.raises(RuntimeError, match="not open"):
        bridge.send_prompt("x", prompt("a"))


async def test_close_settles_everything_with_bridge_closed_and_blocks_reuse() -> None:
    runner = ScriptedRunner()
    bridge = SessionBridge(runner)
    async with bridge:
        session = bridge.create_session("/w")
        running = bridge.send_prompt(session.session_id, prompt("a"))
        waiting = bridge.send_prompt(session.session_id, prompt("b"))
        await trio.testing.wait_all_tasks_blocked()
        await bridge.aclose()  # inside the body: does not cancel us
        assert running.done and waiting.done
        await bridge.aclose()  # idempotent
        await anyio.lowlevel.checkpoint()
    for handle in (running, waiting):
        with pytest.raises(BridgeClosedError) as info:
            await handle.result()
        assert info.value.error_kind == "bridge_closed"
        ended = (await read_all(handle.events))[-1]
        assert isinstance(ended, PromptEnded) and ended.error is info.value
    assert runner.cancelled == ["a"]
    assert session.pending_prompt_count == 0
    assert session.closed
    with pytest.raises(BridgeClosedError):
        bridge.create_session("/w")
    with pytest.raises(BridgeClosedError):
        bridge.send_prompt(session.session_id, prompt("c"))
    with pytest.raises(BridgeClosedError):
        await bridge.fork(session.session_id)
    with pytest.raises(RuntimeError, match="reopened"):
        async with bridge:
            pass
    await bridge.aclose()


async def test_already_open_and_close_before_open() -> None:
    bridge = SessionBridge(ScriptedRunner())
    async with bridge:
        with pytest.raises(RuntimeError, match="already open"):
            await bridge.__aenter__()
    never_opened = SessionBridge(ScriptedRunner())
    await never_opened.aclose()
    with pytest.raises(RuntimeError, match="reopened"):
        await never_opened.__aenter__()


async def test_host_cancellation_settles_every_prompt() -> None:
    runner = ScriptedRunner()
    with anyio.CancelScope() as host:
        async with SessionBridge(runner) as bridge:
            session = bridge.create_session("/w")
            running = bridge.send_prompt(session.session_id, prompt("a"))
            waiting = bridge.send_prompt(session.session_id, prompt("b"))
            await trio.testing.wait_all_tasks_blocked()
            host.cancel()
            await anyio.sleep_forever()
    assert host.cancelled_caught
    for handle in (running, waiting):
        with pytest.raises(BridgeClosedError) as info:
            await handle.result()
        ended = (await read_all(handle.events))[-1]
        assert isinstance(ended, PromptEnded) and ended.error is info.value
    assert session.pending_prompt_count == 0


async def test_body_error_propagates_and_prompts_settle() -> None:
    runner = ScriptedRunner()
    with pytest.raises(KeyError):
        async with SessionBridge(runner) as bridge:
            session = bridge.create_session("/w")
            running = bridge.send_prompt(session.session_id, prompt("a"))
            await trio.testing.wait_all_tasks_blocked()
            raise KeyError("body")
    with pytest.raises(BridgeClosedError):
        await running.result()


async def test_settings_listeners_hear_each_real_change_once_in_order_with_its_origin() -> None:
    async with SessionBridge(ScriptedRunner()) as bridge:
        heard: list[tuple[str, str, str | None, object | None]] = []
        remove = bridge.add_settings_listener(
            lambda change: heard.append((change.session_id, change.setting, change.previous, change.origin))
        )
        entry = await bridge.open_session("/tmp")
        face = object()
        await entry.set_mode("read-only", origin=face)
        await entry.set_mode("read-only", origin=face)  # the value it has: nothing
        await entry.set_model("big")
        await entry.set_model("big")
        await entry.set_title("Renamed", origin=face)
        await entry.set_title("Renamed")
        await entry.set_title("")
        await read_all(bridge.send_prompt(entry.session_id, prompt("ok:first prompt"), origin=face).events)
        sid = entry.session_id
        assert heard == [
            (sid, "mode", "default", face),
            (sid, "model", None, None),
            (sid, "title", "", face),
            (sid, "title", "Renamed", None),
            (sid, "title", "", face),  # the first prompt titles it at admission, as its sender
        ]
        assert entry.title == "ok:first prompt"
        remove()
        await entry.set_mode("default")
        assert len(heard) == 5
