"""Provider test fixtures: a running loopback model, an SDK client on it, and a raw HTTP/1.1 client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio
import h11
import openai
import pytest

from acp_server.provider import make_openai_client
from acp_server.provider.offline import LoopbackModel


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


@pytest.fixture
async def client(model: LoopbackModel) -> AsyncIterator[openai.AsyncOpenAI]:
    async with make_openai_client(base_url=model.base_url, api_key=None) as sdk:
        yield sdk


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    parts: list[bytes]  # body as received, one entry per h11 Data event

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)


RawRequest = Callable[..., Awaitable[RawResponse]]


@pytest.fixture
def raw_response() -> RawResponse:
    """An empty response for ``raw_request(..., into=...)``: it keeps what arrived if the read is cut."""
    return RawResponse(0, {}, [])


@pytest.fixture
def raw_request(model: LoopbackModel) -> RawRequest:
    """Send one request on a fresh connection with h11 and read the whole response (or until cancelled)."""
    port = int(model.base_url.split(":")[2].split("/")[0])

    async def send(
        method: str,
        target: str,
        body: bytes = b"",
        *,
        raw: bytes | None = None,
        into: RawResponse | None = None,
    ) -> RawResponse:
        response = into or RawResponse(0, {}, [])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            conn = h11.Connection(h11.CLIENT)
            if raw is not None:
                await stream.send(raw)
            else:
                headers = [("host", "127.0.0.1"), ("content-length", str(len(body)))]
                data = conn.send(h11.Request(method=method, target=target, headers=headers))
                await stream.send(data + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    try:
                        conn.receive_data(await stream.receive())
                    except anyio.EndOfStream:
                        conn.receive_data(b"")
                elif isinstance(event, h11.Response):
                    response.status = event.status_code
                    response.headers = {k.decode(): v.decode() for k, v in event.headers}
                elif isinstance(event, h11.Data):
                    response.parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    return response

    return send
