"""In-memory doubles for pipeline tests: chunks, a stream of them (for the watchdog) that is also an SSE response
body (for the pipeline, which reads the body itself), a client, and :func:`guard_stream` (the watchdog over an
already open stream).

Everything runs on anyio (virtual time under trio's ``MockClock``); nothing touches the network.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
import httpx2
import openai

from acp_server.pipeline._watchdog import ChunkStream, guarded_stream


@dataclass(frozen=True)
class FakeDelta:
    content: str | None = None
    reasoning_content: str | None = None
    role: str | None = None


@dataclass(frozen=True)
class FakeChoice:
    delta: FakeDelta
    finish_reason: str | None = None
    index: int = 0


@dataclass(frozen=True)
class FakeChunk:
    choices: list[FakeChoice]


def chunk(text: str | None = None, *, reasoning: str | None = None, finish: str | None = None) -> FakeChunk:
    """One ``chat.completion.chunk`` with optional text, reasoning and finish reason."""
    return FakeChunk([FakeChoice(FakeDelta(content=text, reasoning_content=reasoning), finish_reason=finish)])


def role_chunk() -> FakeChunk:
    """The first chunk many servers send: a role and nothing else."""
    return FakeChunk([FakeChoice(FakeDelta(role="assistant"))])


def sse(event: FakeChunk | dict[str, Any] | bytes) -> bytes:
    """A chunk (or any JSON value) as the ``data:`` event a server writes; bytes are written as they are."""
    if isinstance(event, bytes):
        return event
    if isinstance(event, FakeChunk):
        event = {
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": c.index,
                    "delta": {k: v for k, v in vars(c.delta).items() if v is not None},
                    "finish_reason": c.finish_reason,
                }
                for c in event.choices
            ],
        }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


_REQUEST = httpx2.Request("POST", "http://model.test/v1/chat/completions")


@dataclass
class FakeResponse:
    """The ``httpx2.Response`` the pipeline gets from ``client.post``: its body is its stream's script, as SSE."""

    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    body: bytes = b""
    stream: MockStream | None = None
    request: httpx2.Request = _REQUEST
    http_version: str = "HTTP/1.1"

    async def aiter_raw(self) -> Any:
        for i in range(0, len(self.body), 16):
            yield self.body[i : i + 16]

    async def aiter_bytes(self) -> AsyncGenerator[bytes, None]:
        assert self.stream is not None
        while True:
            try:
                step = await self.stream.__anext__()
            except StopAsyncIteration:
                return
            yield sse(step)

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.close()


Step = FakeChunk | dict[str, Any] | bytes | float | BaseException
"""A script step: a chunk to yield (or a JSON event, or raw body bytes, for the pipeline), seconds to sleep
before the next step, or an exception to raise."""


class MockStream:
    """Mimics ``openai.AsyncStream``: async-iterable of chunk objects; ``close()`` is recorded.

    Plays ``script`` then, with ``then="hang"``, never resolves (the read pends until cancelled); with
    ``then="end"`` ends cleanly. ``on_abort``: the exception the pending read raises when it is cancelled —
    the "orphaned next() rejection" of a torn-down request (W6). ``on_close`` runs inside ``close()``.
    """

    def __init__(
        self,
        script: Sequence[Step] = (),
        *,
        then: Literal["hang", "end"] = "hang",
        on_abort: BaseException | None = None,
        on_close: Callable[[], None] | None = None,
        content_type: str | None = "text/event-stream",
        body: bytes = b"",
    ) -> None:
        self._script = list(script)
        self._then = then
        self._on_abort = on_abort
        self._on_close = on_close
        headers = {} if content_type is None else {"content-type": content_type}
        self.response = FakeResponse(headers, body, self)
        self.yielded_at: list[float] = []
        self.close_calls: list[float] = []
        self.orphan_raised = False
        self.reads = 0

    def __aiter__(self) -> MockStream:
        return self

    async def __anext__(self) -> Any:
        self.reads += 1
        if self.close_calls:
            raise httpx2.StreamClosed()
        while self._script:
            step = self._script.pop(0)
            if isinstance(step, BaseException):
                raise step
            if isinstance(step, (int, float)):
                await anyio.sleep(step)
                continue
            self.yielded_at.append(anyio.current_time())
            return step
        if self._then == "end":
            raise StopAsyncIteration
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            if self._on_abort is not None:
                self.orphan_raised = True
                raise self._on_abort from None
            raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        self.close_calls.append(anyio.current_time())
        if self._on_close is not None:
            self._on_close()

    @property
    def closed(self) -> bool:
        return bool(self.close_calls)


def drip(n: int, every_s: float, *, text: str = "w", reasoning: bool = False) -> list[Step]:
    """``n`` chunks, one every ``every_s`` seconds (the first after one interval)."""
    steps: list[Step] = []
    for i in range(n):
        steps += [every_s, chunk(reasoning=f"{text}{i} ") if reasoning else chunk(f"{text}{i} ")]
    return steps


def status_error(
    status: int, *, headers: dict[str, str] | None = None, message: str = "boom", error: dict[str, Any] | None = None
) -> openai.APIStatusError:
    """The exception the SDK raises for an HTTP error status (the right subclass for 429, 401, 5xx...); ``error``:
    the body's ``error`` object (default: ``message`` with a neutral type)."""
    response = httpx2.Response(status, headers=headers or {}, request=_REQUEST)
    body = {"error": error if error is not None else {"message": message, "type": "test"}}
    client = openai.AsyncOpenAI(api_key="sk-test", base_url="http://model.test/v1")
    return client._make_status_error(f"Error code: {status} - {body}", body=body, response=response)


def connection_error(cause: BaseException) -> openai.APIConnectionError:
    """``APIConnectionError`` chained to ``cause`` as the SDK raises it (``raise ... from err``)."""
    try:
        raise openai.APIConnectionError(request=_REQUEST) from cause
    except openai.APIConnectionError as exc:
        return exc


def timeout_error() -> openai.APITimeoutError:
    try:
        raise openai.APITimeoutError(request=_REQUEST) from httpx2.ReadTimeout("read timed out")
    except openai.APITimeoutError as exc:
        return exc


class FakeClient:
    """Stands in for ``AsyncOpenAI``: ``post`` (what the pipeline sends its request with) plays ``outcomes`` in
    order (a stream, whose response it returns; an exception to raise; or seconds to wait before the next outcome)
    and records call instants and the request bodies, decoded (``kwargs``)."""

    def __init__(
        self, *outcomes: MockStream | BaseException | float, api_key: str = "sk-secret-123456"
    ) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[float] = []
        self.kwargs: list[dict[str, Any]] = []
        self.streams: list[MockStream] = []
        self.api_key = api_key
        self.base_url = "http://model.test/v1/"  # as the SDK keeps it: with a trailing slash
        self.max_retries = 0

    async def post(self, path: str, *, cast_to: type, content: bytes, **_: Any) -> FakeResponse:
        assert (path, cast_to) == ("/chat/completions", httpx2.Response)
        self.calls.append(anyio.current_time())
        self.kwargs.append(json.loads(content))
        if not self.outcomes:
            raise AssertionError("no scripted outcome left")
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, (int, float)):  # seconds the headers take, then the next outcome
            delay, outcome = outcome, self.outcomes.pop(0)
            await anyio.sleep(delay)
        if isinstance(outcome, BaseException):
            raise outcome
        self.streams.append(outcome)
        return outcome.response


# --- the watchdog over an already open stream ---

T = TypeVar("T")


def guard_stream(
    stream: ChunkStream[T],
    *,
    idle_timeout_ms: float,
    max_lifetime_ms: float = 0,
    close_timeout_ms: float = 1_000,
) -> AsyncGenerator[T, None]:
    """``guarded_stream`` over an already open stream (the clocks start at the first iteration)."""

    async def ready() -> ChunkStream[T]:
        return stream

    return guarded_stream(
        ready, idle_timeout_ms=idle_timeout_ms, max_lifetime_ms=max_lifetime_ms, close_timeout_ms=close_timeout_ms
    )
