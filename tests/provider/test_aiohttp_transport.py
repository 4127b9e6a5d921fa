"""The model client on asyncio: the SDK's aiohttp transport, its pool unbounded and its errors named right.

Real sockets on 127.0.0.1 (a raw listener where the scriptable model cannot misbehave the way a test needs).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import openai
import pytest
from anyio.abc import SocketStream

from acp_server.pipeline import ChatRequest, ModelTransportError, ModelTurnError, StreamPolicy, run_chat
from acp_server.pipeline._classify import classify_retry_error
from acp_server.provider import make_openai_client
from acp_server.provider._aiohttp import AioHttpModelClient

pytestmark = pytest.mark.anyio

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
ANSWER = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def read_request(stream: SocketStream) -> bytes:
    """Read one request's head and its content-length body; return the head."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += await stream.receive()
    return head


@asynccontextmanager
async def raw_server(handle: object) -> AsyncIterator[str]:
    """A listener on 127.0.0.1 calling ``handle(stream)`` per connection; yields the base URL."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield f"http://127.0.0.1:{port}/v1"
        tg.cancel_scope.cancel()


async def test_on_asyncio_the_client_streams_through_aiohttp() -> None:
    client = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key=None)
    assert isinstance(client._client, AioHttpModelClient)
    await client.close()


async def test_more_turns_than_aiohttp_s_default_pool_stream_at_once() -> None:
    """aiohttp's connector caps connections at 100 by default: the 101st turn would wait for a slot (and time out
    as a model error against a healthy model). Every request is held until all have arrived."""
    turns = 120
    arrived = 0
    all_arrived = anyio.Event()

    async def handle(stream: SocketStream) -> None:
        nonlocal arrived
        async with stream:
            await read_request(stream)
            arrived += 1
            if arrived == turns:
                all_arrived.set()
            await all_arrived.wait()
            await stream.send(SSE_HEAD + chunked(ANSWER) + b"0\r\n\r\n")
            await anyio.sleep_forever()  # the client closes after [DONE]

    async with raw_server(handle) as base_url:
        client = make_openai_client(base_url=base_url, api_key=None)
        finished: list[str | None] = []

        async def turn() -> None:
            async def ignore(delta: object) -> None:
                return None

            request = ChatRequest(model="m", messages=[{"role": "user", "content": "x"}])
            finished.append((await run_chat(client, request, StreamPolicy(), ignore)).finish_reason)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(turns):
                    tg.start_soon(turn)
        await client.close()
    assert finished == ["stop"] * turns


async def test_a_refused_connection_is_a_connection_error_with_its_errno_not_a_timeout() -> None:
    with socket.socket() as held:  # bound, never listening: connecting is refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        client = make_openai_client(base_url=f"http://127.0.0.1:{port}/v1", api_key=None)
        with pytest.raises(openai.APIConnectionError) as raised:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        await client.close()
    assert not isinstance(raised.value, openai.APITimeoutError)
    assert isinstance(raised.value.__cause__, httpx2.ConnectError)
    assert classify_retry_error(raised.value).transport_code == "ECONNREFUSED"


async def test_a_server_closing_mid_body_is_a_reset_of_the_stream() -> None:
    async def handle(stream: SocketStream) -> None:
        async with stream:
            await read_request(stream)
            await stream.send(SSE_HEAD + chunked(b'data: {"choices":[{"index":0,"delta":{"content":"h"}}]}\n\n'))
        # closed without the last chunk: the body is cut

    async with raw_server(handle) as base_url:
        client = make_openai_client(base_url=base_url, api_key=None)
        policy = StreamPolicy(stream_max_retries=0)
        got: list[object] = []

        async def keep(delta: object) -> None:
            got.append(delta)

        with pytest.raises(ModelTurnError) as raised, anyio.fail_after(10):
            await run_chat(client, ChatRequest(model="m", messages=[]), policy, keep)
        await client.close()
    assert len(got) == 1  # the chunk before the cut reached the caller
    assert isinstance(raised.value, ModelTransportError)
    assert raised.value.transport_code == "ECONNRESET", raised.value


async def test_a_read_timeout_stays_a_timeout() -> None:
    async def handle(stream: SocketStream) -> None:
        async with stream:
            await read_request(stream)
            await stream.send(SSE_HEAD)
            await anyio.sleep_forever()

    async with raw_server(handle) as base_url:
        client = make_openai_client(base_url=base_url, api_key=None)
        http = client._client
        with pytest.raises(httpx2.ReadTimeout), anyio.fail_after(10):
            async with http.stream("POST", f"{base_url}/chat/completions", content=b"{}", timeout=0.2) as response:
                async for _ in response.aiter_bytes():
                    pass
        await client.close()


async def test_a_proxy_from_the_environment_carries_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTP_PROXY`` is honoured on the aiohttp transport too: the request reaches the proxy with its absolute URI
    (the model's host need not resolve here), and the streamed answer comes back through it."""
    targets: list[bytes] = []

    async def proxy(stream: SocketStream) -> None:
        async with stream:
            targets.append((await read_request(stream)).split(b" ", 2)[1])
            await stream.send(SSE_HEAD + chunked(ANSWER) + b"0\r\n\r\n")
            await anyio.sleep_forever()

    async with raw_server(proxy) as proxy_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = make_openai_client(base_url="http://model.invalid/v1", api_key=None)
        texts: list[str] = []

        async def keep(delta: object) -> None:
            texts.append(getattr(delta, "text", ""))

        with anyio.fail_after(10):
            finished = await run_chat(client, ChatRequest(model="m", messages=[]), StreamPolicy(), keep)
        await client.close()
    assert finished.finish_reason == "stop" and "".join(texts) == "hi"
    assert targets == [b"http://model.invalid/v1/chat/completions"]


async def test_a_response_with_a_large_header_streams_as_over_httpx2() -> None:
    """aiohttp refuses a header line over 8 KiB by default (a long trace header or cookie from a proxy in front of
    the model); httpx2 accepts heads up to 100 KiB, and so does the session here."""
    head = SSE_HEAD.replace(b"\r\n\r\n", b"\r\nx-trace: " + b"a" * 20_000 + b"\r\n\r\n")

    async def handle(stream: SocketStream) -> None:
        async with stream:
            await read_request(stream)
            await stream.send(head + chunked(ANSWER) + b"0\r\n\r\n")
            await anyio.sleep_forever()

    async with raw_server(handle) as base_url:
        client = make_openai_client(base_url=base_url, api_key=None)

        async def ignore(delta: object) -> None:
            return None

        with anyio.fail_after(10):
            finished = await run_chat(client, ChatRequest(model="m", messages=[]), StreamPolicy(), ignore)
        await client.close()
    assert finished.finish_reason == "stop"


async def test_a_response_that_is_not_http_is_a_transport_error_not_an_http_400() -> None:
    """aiohttp's parse error carries status 400: left as it is, it read as the model refusing the request."""

    async def handle(stream: SocketStream) -> None:
        async with stream:
            await read_request(stream)
            await stream.send(b"HTTQ/9 nonsense\r\n\r\n")
            await anyio.sleep_forever()

    async with raw_server(handle) as base_url:
        client = make_openai_client(base_url=base_url, api_key=None)
        policy = StreamPolicy(stream_max_retries=0, connect_max_retries=0, backoff_max_retries=0)

        async def ignore(delta: object) -> None:
            return None

        with pytest.raises(ModelTurnError) as raised, anyio.fail_after(10):
            await run_chat(client, ChatRequest(model="m", messages=[]), policy, ignore)
        await client.close()
    assert isinstance(raised.value, ModelTransportError), raised.value
    assert raised.value.transport_code == "ECONNRESET"
