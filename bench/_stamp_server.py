"""A lean OpenAI-compatible streaming endpoint for the daemon benchmark: many paced streams for little CPU.

``python bench/_stamp_server.py --words N --rate R`` prints ``url <base_url>`` once it listens on 127.0.0.1, then
answers every ``POST /v1/chat/completions`` with a streamed answer of ``N`` content chunks, ``R`` per second on an
absolute schedule (chunk k is due at start + k / R: a late chunk does not delay the ones after it, so the endpoint
offers exactly the nominal rate while it has CPU to spare), each chunk's text the ``CLOCK_MONOTONIC`` instant it
was written (the clock is system-wide, so a reader in another process computes the delay). Then the finish, a usage
chunk and ``[DONE]``. ``GET /v1/models`` lists one model, ``m``. Keep-alive, HTTP/1.1 chunked bodies.

Raw asyncio protocol, frames formatted with one f-string each and one timer per chunk: a real endpoint runs on
other hardware, so what this one costs is taken from the machine the daemon is measured on. Stops when stdin
closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_PREFIX = '{"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":'
_FINISH = f'{_PREFIX}{{}},"finish_reason":"stop"}}]}}'
_USAGE = '{"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'  # noqa: E501
_MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "bench"}]}).encode()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(payload: str) -> bytes:
    return _chunk(f"data: {payload}\n\n".encode())


class _Stream:
    """One streamed answer on its connection: chunk k at ``start + k * period``."""

    def __init__(self, protocol: _Connection, words: int, period_s: float) -> None:
        self.protocol = protocol
        self.left = words
        self.period_s = period_s
        self.loop = asyncio.get_running_loop()
        self.due = self.loop.time()
        protocol.write(_SSE_HEAD + _event(f'{_PREFIX}{{"role":"assistant","content":""}},"finish_reason":null}}]}}'))
        self.loop.call_soon(self.tick)

    def tick(self) -> None:
        if self.protocol.closed:
            return
        if self.left == 0:
            self.protocol.write(_event(_FINISH) + _event(_USAGE) + _event("[DONE]") + b"0\r\n\r\n")
            self.protocol.streaming = False
            return
        self.left -= 1
        text = f" {time.monotonic():.6f}"
        self.protocol.write(_event(f'{_PREFIX}{{"content":"{text}"}},"finish_reason":null}}]}}'))
        self.due += self.period_s
        self.loop.call_at(self.due, self.tick)


class _Connection(asyncio.Protocol):
    """HTTP/1.1 requests one after another (the client waits for each answer's end before the next)."""

    def __init__(self, words: int, period_s: float) -> None:
        self.words = words
        self.period_s = period_s
        self.buffer = b""
        self.closed = False
        self.streaming = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while not self.streaming:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < head_end + 4 + length:
                return
            self.buffer = self.buffer[head_end + 4 + length :]
            method, target, _ = head[0].split(" ", 2)
            if method == "POST" and target.endswith("/chat/completions"):
                self.streaming = True
                _Stream(self, self.words, self.period_s)
            elif method == "GET" and target.endswith("/models"):
                self.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(_MODELS), _MODELS)
                )
            else:
                self.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")


async def main(words: int, rate: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Connection(words, 1 / rate), "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(f"url http://127.0.0.1:{port}/v1", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the bench closes our stdin
    server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.words, args.rate))
