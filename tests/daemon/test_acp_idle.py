"""Abandoned ``/acp`` connections never pile up: whatever a client leaves behind — ``initialize`` POSTs that never
open a stream, streams opened and closed without ``DELETE``, a WebSocket that never initializes or whose peer
vanishes — is dropped within its bound, and the number of live connections is capped (``503`` with a precise error
past it). Each test injects a short ``stream_timeout_s``; the waits are bounded polls of the live count."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from acp_server.daemon import AcpOverHttp
from acp_server.provider.offline import Answer, LoopbackModel

from ._support import Served, assert_documented, running_daemon
from .test_acp_http import CONN, RawAcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SHORT_S = 0.3
"""The injected ``stream_timeout_s``: how long an abandoned connection lives."""


def _acp(served: Served) -> AcpOverHttp:
    return served.acp


async def _until_live(served: Served, count: int, timeout: float = 5.0) -> None:
    """Bounded poll (no event tells when a connection is dropped) until ``count`` ``/acp`` connections are live."""
    with anyio.fail_after(timeout):
        while True:
            if _acp(served).connection_count() == count:
                return
            await anyio.sleep(0.02)


def _ws_url(served: Served) -> str:
    return f"ws{served.url.removeprefix('http')}/acp"


async def test_initialize_posts_that_never_open_a_stream_are_dropped_after_the_stream_timeout() -> None:
    async with running_daemon(None) as served:
        _acp(served).stream_timeout_s = SHORT_S
        clients = [RawAcp(served) for _ in range(20)]
        async with anyio.create_task_group() as tg:
            for acp in clients:
                tg.start_soon(acp.initialize)
        assert len({acp.connection for acp in clients} - {None}) == 20  # each opened its own connection
        await _until_live(served, 0)
        gone = await served.client.delete("/acp", headers={CONN: clients[0].connection or ""})
        assert gone.status_code == 404


async def test_streams_closed_without_delete_drop_the_connection_an_open_reader_keeps_it() -> None:
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="then I left"))
        async with running_daemon(model) as served:
            _acp(served).stream_timeout_s = SHORT_S
            acp = RawAcp(served)
            await acp.initialize()
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                async with acp.stream(session_id) as session_stream:
                    prompt = acp.prompt_message(session_id)
                    assert (await acp.post(prompt, session_id)).status_code == 202
                    messages = await session_stream.until_response(prompt["id"])
                    assert messages[-1]["result"]["stopReason"] == "end_turn"
                await anyio.sleep(3 * SHORT_S)  # longer than the timeout: the open connection stream keeps it
                assert _acp(served).connection_count() == 1
            # both streams closed, no DELETE: the connection goes once the timeout has passed
            await _until_live(served, 0)
            assert (await acp.post(acp.message("session/list", {}))).status_code == 404


async def test_the_connection_cap_refuses_initialize_and_the_upgrade_with_503_until_one_ends() -> None:
    async with running_daemon(None) as served:
        _acp(served).max_connections = 3
        clients = [RawAcp(served) for _ in range(3)]
        for acp in clients:
            await acp.initialize()
        extra = RawAcp(served)
        refused = await extra.post(extra.message("initialize", {"protocolVersion": 1}))
        assert refused.status_code == 503
        assert_documented("POST", "/acp", refused)
        assert CONN not in refused.headers
        assert refused.headers["retry-after"] == "30"  # an abandoned connection is gone by then
        body: dict[str, Any] = refused.json()
        assert body["id"] == 1
        assert body["error"]["code"] == -32603
        assert body["error"]["data"] == {"errorKind": "too_many_connections", "limit": 3, "retryable": True}
        assert "/acp" in body["error"]["message"]
        with pytest.raises(InvalidStatus) as denied:
            async with connect(_ws_url(served), open_timeout=5):
                pass
        assert denied.value.response.status_code == 503
        assert json.loads(denied.value.response.body)["error"]["data"]["errorKind"] == "too_many_connections"
        assert _acp(served).connection_count() == 3
        ended = await served.client.delete("/acp", headers={CONN: clients[0].connection or ""})
        assert ended.status_code == 202
        await extra.initialize()  # a slot is free again
        assert _acp(served).connection_count() == 3


async def test_a_websocket_that_never_sends_initialize_is_closed_after_the_stream_timeout() -> None:
    async with running_daemon(None) as served:
        _acp(served).stream_timeout_s = SHORT_S
        async with connect(_ws_url(served), open_timeout=5) as ws:
            assert _acp(served).connection_count() == 1
            with anyio.fail_after(5), pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1008
            assert "initialize" in (ws.close_reason or "")
        await _until_live(served, 0)


async def test_an_initialized_websocket_may_stay_silent_and_is_cleaned_up_when_its_peer_vanishes() -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    async with running_daemon(None) as served:
        _acp(served).stream_timeout_s = SHORT_S
        async with connect(_ws_url(served), open_timeout=5) as ws:
            await ws.send(json.dumps(initialize))
            with anyio.fail_after(5):
                assert json.loads(await ws.recv())["id"] == 1
            await anyio.sleep(3 * SHORT_S)  # silent past the initialize deadline: a live socket stays
            assert _acp(served).connection_count() == 1
            ws.transport.abort()  # no close frame: the TCP connection just goes away
            await _until_live(served, 0)
