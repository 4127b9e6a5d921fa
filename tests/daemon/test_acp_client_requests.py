"""``/acp``: the agent's requests to its client over the remote transports (a real daemon on 127.0.0.1). A request
sent on behalf of an in-flight prompt goes on that prompt's session stream; the client answers with a ``POST`` of the
response (``202``, with or without ``Acp-Session-Id``) or a WebSocket frame; malformed responses are never answered;
a connection that ends fails the requests still waiting.

No ACP handler asks the client anything yet, so the tests send the requests through the connection's dispatcher.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect

from acp_server.errors import RemoteError
from acp_server.provider.offline import HangAfterHeaders, LoopbackModel
from acp_server.rpc import Dispatcher

from ._support import Served, running_daemon
from .test_acp_http import CONN, RawAcp, Stream

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PERMISSION = {"sessionId": "s", "toolCall": {"toolCallId": "c1"}, "options": []}
SELECTED = {"outcome": {"outcome": "selected", "optionId": "allow"}}


def dispatcher_of(served: Served, connection_id: str) -> Dispatcher:
    return served.acp._connections[connection_id].rpc.dispatcher


async def next_request(stream: Stream) -> dict[str, Any]:
    """The next message on the stream that is a request (updates of the prompt may come first)."""
    while True:
        message = await stream.next()
        if "method" in message and "id" in message:
            return message


async def test_http_a_request_goes_on_its_prompt_stream_and_the_posted_response_answers_it() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model) as served:
            acp = RawAcp(served)
            await acp.initialize()
            assert acp.connection is not None
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                async with acp.stream(session_id) as session_stream:
                    prompt = acp.prompt_message(session_id)
                    assert (await acp.post(prompt, session_id)).status_code == 202
                    await model.wait_for_requests(1)  # the prompt's handler is running
                    dispatcher = dispatcher_of(served, acp.connection)

                    for header in (None, session_id):  # a response is accepted with or without Acp-Session-Id
                        asking = asyncio.ensure_future(
                            dispatcher.request("session/request_permission", PERMISSION, origin=prompt["id"])
                        )
                        asked = await next_request(session_stream)  # on the prompt's stream, not the connection's
                        assert asked["method"] == "session/request_permission" and asked["params"] == PERMISSION
                        stray = asked["id"] + "0"  # malformed, naming no pending request: ignored, never answered
                        bad = {"jsonrpc": "2.0", "id": stray, "result": 1, "error": {"code": 1, "message": "m"}}
                        refused = await acp.post(bad, header)
                        assert (refused.status_code, refused.content) == (202, b"")
                        assert not asking.done()
                        answered = await acp.post({"jsonrpc": "2.0", "id": asked["id"], "result": SELECTED}, header)
                        assert (answered.status_code, answered.content) == (202, b"")
                        with anyio.fail_after(5):
                            assert await asking == SELECTED

                    asking = asyncio.ensure_future(dispatcher.request("fs/read_text_file", {"path": "/x"}))
                    asked = await next_request(conn_stream)  # on behalf of no request: the connection stream
                    failure = {"code": -32002, "message": "Resource not found"}
                    await acp.post({"jsonrpc": "2.0", "id": asked["id"], "error": failure})
                    with pytest.raises(RemoteError) as caught, anyio.fail_after(5):
                        await asking
                    assert (str(caught.value), caught.value.code) == (
                        "fs/read_text_file failed: Resource not found",
                        -32002,
                    )

                    stray = await acp.client.post(
                        "/acp", json={"jsonrpc": "2.0", "id": asked["id"], "result": {}}
                    )  # no connection: refused, with no id that could read as an answer
                    assert stray.status_code == 400 and stray.json()["id"] is None

                    asking = asyncio.ensure_future(
                        dispatcher.request("session/request_permission", PERMISSION, origin=prompt["id"])
                    )
                    await next_request(session_stream)
                    assert (await acp.client.delete("/acp", headers={CONN: acp.connection})).status_code == 202
                    with pytest.raises(RemoteError) as closed, anyio.fail_after(5):
                        await asking  # the client that could answer is gone
                    assert closed.value.code is None and str(closed.value).startswith("connection closed")


async def receive(socket: ClientConnection) -> dict[str, Any]:
    with anyio.fail_after(5):
        message: dict[str, Any] = json.loads(await socket.recv())
    return message


async def test_websocket_a_response_frame_answers_the_request_and_a_malformed_one_gets_nothing() -> None:
    async with running_daemon(None) as served:
        async with connect(f"ws{served.url.removeprefix('http')}/acp") as socket:
            assert socket.response is not None
            connection_id = socket.response.headers[CONN]
            await socket.send(
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
            )
            assert "result" in await receive(socket)
            dispatcher = dispatcher_of(served, connection_id)

            asking = asyncio.ensure_future(dispatcher.request("fs/read_text_file", {"path": "/x"}))
            asked = await receive(socket)
            assert asked["method"] == "fs/read_text_file" and asked["id"].startswith("acp-server:")
            stray = asked["id"] + "0"  # malformed frames naming no pending request: ignored, never answered
            for bad in (
                {"jsonrpc": "2.0", "id": stray},
                {"jsonrpc": "2.0", "id": stray, "error": "no"},
                {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "m"}},
            ):
                await socket.send(json.dumps(bad))
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}))
            listed = await receive(socket)  # the next frame is this answer: nothing was owed to the bad responses
            assert listed["id"] == 2 and "result" in listed
            assert not asking.done()
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": "x"}}))
            with anyio.fail_after(5):
                assert await asking == {"content": "x"}

            # A malformed frame naming a pending request fails that request at once (it must not wait for ever).
            asking = asyncio.ensure_future(dispatcher.request("fs/read_text_file", {"path": "/y"}))
            asked = await receive(socket)
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "error": "no"}))
            with pytest.raises(RemoteError, match="malformed"), anyio.fail_after(5):
                await asking

            asking = asyncio.ensure_future(dispatcher.request("terminal/output", {"terminalId": "t"}))
            await receive(socket)
        with pytest.raises(RemoteError) as closed, anyio.fail_after(5):
            await asking  # the socket closed before an answer
        assert closed.value.code is None
