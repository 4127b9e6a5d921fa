"""delete_session: the session is closed as by close_session (its running prompt cancelled and unwound first), then
its stored history removed; unknown is SessionNotFoundError; a load racing the delete finds nothing."""

from __future__ import annotations

import anyio
import pytest
import trio
import trio.testing

from acp_server.bridge import SessionBridge, SessionClosedError, SessionNotFoundError
from acp_server.store import MemorySessionStore

from ._support import ScriptedRunner, prompt

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


class HeldDelete(MemorySessionStore):
    """A store whose delete waits for :attr:`proceed` (and records the order of events)."""

    def __init__(self) -> None:
        super().__init__()
        self.proceed = anyio.Event()
        self.deleting = anyio.Event()

    async def delete_session(self, session_id: str) -> None:
        self.deleting.set()
        await self.proceed.wait()
        await super().delete_session(session_id)


async def test_delete_cancels_the_running_prompt_first_then_removes_the_stored_session() -> None:
    runner = ScriptedRunner()
    store = MemorySessionStore()
    async with store, SessionBridge(runner, store=store) as bridge:
        entry = await bridge.open_session("/w")
        other = await bridge.open_session("/w")
        sid = entry.session_id
        running = bridge.send_prompt(sid, prompt("a"))
        waiting = bridge.send_prompt(sid, prompt("b"))
        detached: list[str] = []
        bridge.add_close_listener(detached.append)
        await trio.testing.wait_all_tasks_blocked()
        assert await store.get_session(sid) is not None

        await bridge.delete_session(sid)

        assert running.done and waiting.done and runner.cancelled == ["a"]  # unwound before the delete returned
        for handle in (running, waiting):
            with pytest.raises(SessionClosedError):
                await handle.result()
        assert entry.closed and detached == [sid]
        assert await store.get_session(sid) is None  # its row and history are gone
        assert await store.get_session(other.session_id) is not None
        with pytest.raises(SessionNotFoundError):
            bridge.get(sid)
        with pytest.raises(SessionNotFoundError):
            await bridge.load_session(sid)
        with pytest.raises(SessionNotFoundError) as info:
            await bridge.delete_session(sid)
        assert info.value.details() == {"sessionId": sid}


async def test_a_stored_session_that_is_not_attached_is_deleted_from_the_store() -> None:
    store = MemorySessionStore()
    async with store:
        await store.create_session("stored", "/w")
        async with SessionBridge(ScriptedRunner(), store=store) as bridge:
            await bridge.delete_session("stored")
            assert await store.get_session("stored") is None
            with pytest.raises(SessionNotFoundError):
                await bridge.delete_session("nope")


async def test_a_memory_only_session_is_closed() -> None:
    async with SessionBridge(ScriptedRunner()) as bridge:
        entry = bridge.create_session("/w", session_id="mem")
        await bridge.delete_session("mem")
        assert entry.closed
        with pytest.raises(SessionNotFoundError):
            bridge.get("mem")


async def test_a_load_while_the_delete_runs_finds_nothing() -> None:
    store = HeldDelete()
    async with store, SessionBridge(ScriptedRunner(), store=store) as bridge:
        sid = (await bridge.open_session("/w")).session_id
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.delete_session, sid)
            await store.deleting.wait()  # closed here, its rows not yet removed
            assert await store.get_session(sid) is not None
            with pytest.raises(SessionNotFoundError):
                await bridge.load_session(sid)
            with pytest.raises(SessionNotFoundError):
                await bridge.resume_session(sid)
            store.proceed.set()
        assert await store.get_session(sid) is None
        with pytest.raises(SessionNotFoundError):
            bridge.get(sid)
