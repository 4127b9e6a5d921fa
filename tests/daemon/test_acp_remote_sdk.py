"""The official ACP Python SDK's remote clients (``acp.http`` Streamable HTTP, ``acp.ws`` WebSocket) against ``/acp``
of a real daemon (127.0.0.1): initialize → session/new → streamed prompt → cancel → load, and the sessions they make
are the REST face's sessions (one bridge, one queue). Over HTTP/2: through HAProxy, ``tests/e2e/test_haproxy.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from acp import connect_to_agent
from acp.http import create_http_stream
from acp.schema import AgentMessageChunk, UserMessageChunk
from acp.ws import create_websocket_stream

from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip
from tests.acp_blocks import text_block

from ._support import Served, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class RecordingClient:
    """The client side: records every update the SDK delivers."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.chunk_arrived = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if isinstance(update, AgentMessageChunk):
            self.chunk_arrived.set()

    def on_connect(self, conn: Any) -> None:
        pass

    def text(self, kind: type, since: int = 0) -> str:
        return "".join(u.content.text for _, u in self.updates[since:] if isinstance(u, kind))


@asynccontextmanager
async def sdk_connection(served: Served, kind: str, client: RecordingClient) -> AsyncIterator[Any]:
    if kind == "http":
        transport = create_http_stream(f"{served.url}/acp")
    else:
        transport = await create_websocket_stream(f"ws{served.url.removeprefix('http')}/acp")
    conn = connect_to_agent(client, transport)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.mark.parametrize("kind", ["http", "ws"])
async def test_sdk_initialize_new_prompt_cancel_load(kind: str) -> None:
    async with LoopbackModel() as model:
        model.enqueue(
            Answer(text="first answer here", reasoning="thinking"),
            SlowDrip(interval_s=0.02, text="word " * 2000),
        )
        async with running_daemon(model) as served:
            client = RecordingClient()
            async with sdk_connection(served, kind, client) as conn:
                with anyio.fail_after(10):
                    init = await conn.initialize(protocol_version=1)
                    assert init.protocol_version == 1
                    session = await conn.new_session(cwd="/tmp", mcp_servers=[])
                    session_id = session.session_id
                    assert served.bridge.get(session_id) is not None  # the bridge's session, shared with REST
                    first = await conn.prompt(session_id=session_id, prompt=[text_block("hello")])
                    assert first.stop_reason == "end_turn"
                    assert client.text(AgentMessageChunk) == "first answer here"

                    client.chunk_arrived = anyio.Event()
                    result: dict[str, Any] = {}
                    async with anyio.create_task_group() as tg:

                        async def long_prompt() -> None:
                            result["r"] = await conn.prompt(session_id=session_id, prompt=[text_block("long")])

                        tg.start_soon(long_prompt)
                        await client.chunk_arrived.wait()
                        await conn.cancel(session_id=session_id)
                    assert result["r"].stop_reason == "cancelled"

            loader = RecordingClient()
            async with sdk_connection(served, kind, loader) as conn:
                with anyio.fail_after(10):
                    await conn.initialize(protocol_version=1)
                    await conn.load_session(session_id=session_id, cwd="/tmp", mcp_servers=[])
                    assert loader.text(UserMessageChunk).startswith("hello")
                    assert "first answer here" in loader.text(AgentMessageChunk)
                    assert {sid for sid, _ in loader.updates} == {session_id}
