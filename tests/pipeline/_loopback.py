"""The real SDK over real loopback sockets against the scriptable model, with leak accounting.

``loopback()`` opens the model and an SDK client on it; on exit it checks that no request is still in flight
(every pooled connection idle), then closes the client and checks that the task count and the process's open
file descriptors are back to what they were (no leaked task, no leaked socket).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import openai

from acp_server.pipeline import ChatRequest, Delta, Finished, StreamEvent, StreamPolicy, stream_chat
from acp_server.provider import make_openai_client
from acp_server.provider.offline import LoopbackModel

REQUEST = ChatRequest(model="m", messages=[{"role": "user", "content": "hello there"}])


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def requests_in_flight(client: openai.AsyncOpenAI) -> int:
    """Pooled connections still carrying a request (an unclosed response keeps its connection busy)."""
    transport: Any = client._client._transport  # test-only peeks: httpx2 -> httpcore2, or aiohttp's connector
    if hasattr(transport, "_pool"):
        return sum(1 for connection in transport._pool.connections if not connection.is_idle())
    session = transport._inner.client  # the aiohttp ClientSession, made on the first request
    return 0 if session is None else len(session.connector._acquired)


@asynccontextmanager
async def loopback() -> AsyncIterator[tuple[LoopbackModel, openai.AsyncOpenAI]]:
    fds = open_fds()
    async with LoopbackModel() as model:
        await anyio.wait_all_tasks_blocked()  # the listener spawns its accept task on its first step
        tasks = len(anyio.get_running_tasks())
        client = make_openai_client(base_url=model.base_url, api_key=None)
        try:
            yield model, client
            assert requests_in_flight(client) == 0, "a response was left open"
        finally:
            await client.close()
        for _ in range(500):  # the model's connection tasks end once they see EOF (poll: no event to wait on)
            if len(anyio.get_running_tasks()) <= tasks:
                break
            await anyio.sleep(0.01)
        assert len(anyio.get_running_tasks()) == tasks, "a task was leaked"
    assert open_fds() == fds, "a socket was leaked"


@dataclass
class Outcome:
    events: list[tuple[float, StreamEvent]] = field(default_factory=list)
    error: BaseException | None = None
    started: float = 0.0
    ended: float = 0.0

    @property
    def text(self) -> str:
        return "".join(e.text for _, e in self.events if isinstance(e, Delta))

    @property
    def deltas(self) -> list[Delta]:
        return [e for _, e in self.events if isinstance(e, Delta)]

    @property
    def finished(self) -> list[Finished]:
        return [e for _, e in self.events if isinstance(e, Finished)]


async def run_turn(
    client: openai.AsyncOpenAI, policy: StreamPolicy, *, messages: list[dict[str, Any]] | None = None
) -> Outcome:
    """Consume one ``stream_chat`` turn (of ``messages``, default ``REQUEST``'s); a ``ModelTurnError`` is captured,
    anything else propagates."""
    from acp_server.pipeline import ModelTurnError

    request = REQUEST if messages is None else ChatRequest(REQUEST.model, messages)
    outcome = Outcome(started=anyio.current_time())
    try:
        async with aclosing(stream_chat(client, request, policy)) as events:
            async for event in events:
                outcome.events.append((anyio.current_time(), event))
    except ModelTurnError as exc:
        outcome.error = exc
    outcome.ended = anyio.current_time()
    return outcome
