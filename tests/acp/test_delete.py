"""``session/delete`` through the bound method table: advertised as the schema names it, a running prompt is cancelled
and answered first, the session and its stored history are gone after the answer, unknown is session_not_found."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp.schema import DeleteSessionResponse, InitializeResponse

from acp_server.bridge import SessionClosedError, SessionNotFoundError
from acp_server.errors import InvalidInputError

from ._support import bound

pytestmark = pytest.mark.anyio


async def test_initialize_advertises_session_delete() -> None:
    async with bound() as b:
        reply = await b.requests["initialize"]({"protocolVersion": 1}, b.peer())
    parsed = InitializeResponse.model_validate(reply)
    assert parsed.agent_capabilities is not None and parsed.agent_capabilities.session_capabilities is not None
    assert parsed.agent_capabilities.session_capabilities.delete is not None
    assert reply["agentCapabilities"]["sessionCapabilities"]["delete"] == {}


async def test_delete_cancels_the_running_prompt_answers_it_first_then_removes_the_session() -> None:
    async with bound() as b:
        sid = await b.new_session()
        kept = await b.new_session()
        order: list[tuple[str, Any]] = []

        async def prompt() -> None:
            with pytest.raises(SessionClosedError) as closed:  # its answer is the error, as on session/close
                await b.prompt(sid, "block", b.peer(7))
            order.append(("prompt", closed.value.error_kind))

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            await b.runner.running.wait()
            reply = await b.requests["session/delete"]({"sessionId": sid}, b.peer(8))
            order.append(("delete", reply))
        assert b.runner.cancelled == ["block"]
        assert order == [("prompt", "session_closed"), ("delete", {})]  # the prompt's answer came first
        DeleteSessionResponse.model_validate(reply)
        assert reply == {}
        listed = await b.requests["session/list"](None, b.peer())
        assert [s["sessionId"] for s in listed["sessions"]] == [kept]
        assert await b.bridge.store.get_session(sid) is None
        for method, params in (
            ("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}),
            ("session/resume", {"sessionId": sid, "cwd": "/tmp"}),
            ("session/delete", {"sessionId": sid}),
        ):
            with pytest.raises(SessionNotFoundError):
                await b.requests[method](params, b.peer())


async def test_delete_of_an_unknown_session_or_without_an_id_changes_nothing() -> None:
    async with bound() as b:
        sid = await b.new_session()
        with pytest.raises(SessionNotFoundError) as unknown:
            await b.requests["session/delete"]({"sessionId": "nope"}, b.peer())
        assert unknown.value.error_kind == "session_not_found"
        with pytest.raises(InvalidInputError) as invalid:
            await b.requests["session/delete"]({}, b.peer())
        assert "sessionId" in str(invalid.value)
        assert await b.bridge.store.get_session(sid) is not None
        assert b.bridge.get(sid).session_id == sid
