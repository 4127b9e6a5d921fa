"""The body's transport failures, mapped once at the boundary where the pipeline reads the network itself: each
leaves the SSE reader as the SDK's exception for it (the original as ``__cause__``), as the SDK's own stream raised
it, so the classification and the final error see one family whoever read the socket.
"""

from __future__ import annotations

import ssl
from contextlib import aclosing

import anyio
import httpx2
import openai
import pytest

from acp_server.pipeline import ChatRequest, ModelTransportError, StreamPolicy, stream_chat
from acp_server.pipeline._events import Events

from ._mocks import FakeClient, MockStream, chunk

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


@pytest.mark.parametrize(
    ("failure", "mapped"),
    [
        (httpx2.ReadTimeout("read timed out"), openai.APITimeoutError),
        (httpx2.ReadError("[Errno 104] Connection reset by peer"), openai.APIConnectionError),
        (httpx2.RemoteProtocolError("peer closed connection"), openai.APIConnectionError),
        (ssl.SSLError("bad record mac"), openai.APIConnectionError),
        (anyio.EndOfStream(), openai.APIConnectionError),
    ],
)
async def test_a_failed_body_read_is_the_sdks_exception_from_the_original(
    failure: BaseException, mapped: type[openai.APIConnectionError]
) -> None:
    stream = MockStream([chunk("a"), failure])
    events = Events(stream.response, ())  # type: ignore[arg-type]
    assert (await events.__anext__())["choices"][0]["delta"] == {"content": "a"}
    with pytest.raises(openai.APIConnectionError) as raised:
        await events.__anext__()
    assert type(raised.value) is mapped  # a timeout is not any connection error: the SDK tells them apart
    assert raised.value.__cause__ is failure
    assert raised.value.request is stream.response.request
    await events.close()


async def test_what_is_not_a_transport_failure_passes_unchanged() -> None:
    bug = KeyError("not ours to map")
    events = Events(MockStream([bug]).response, ())  # type: ignore[arg-type]
    with pytest.raises(KeyError) as raised:
        await events.__anext__()
    assert raised.value is bug


async def test_the_end_of_the_body_ends_the_events() -> None:
    events = Events(MockStream([chunk("a")], then="end").response, ())  # type: ignore[arg-type]
    assert [event async for event in events] == [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}
    ]


async def test_a_reset_mid_body_reaches_the_turn_as_the_sdks_connection_error() -> None:
    reset = httpx2.ReadError("[Errno 104] Connection reset by peer")
    client = FakeClient(MockStream([chunk("a"), reset]))
    request = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ModelTransportError) as raised:
        async with aclosing(stream_chat(client, request, StreamPolicy(idle_timeout_ms=1_000))) as events:  # type: ignore[arg-type]
            async for _ in events:
                pass  # a delta reached the caller: the reset is not retried
    error = raised.value
    assert (error.transport_code, error.phase, error.attempts) == ("ECONNRESET", "mid_stream", 1)
    assert "Connection error." in str(error)  # the SDK's message, as its own stream said it
    assert type(error.__cause__) is openai.APIConnectionError
    assert error.__cause__.__cause__ is reset
