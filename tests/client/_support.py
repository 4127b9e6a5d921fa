"""A real daemon on 127.0.0.1:0 (the ``acp-server serve`` stack, in process) and a client transport that records
every request the SDK sends and can inject faults at the HTTP boundary.

``Recorder`` wraps the real ``httpx2.AsyncHTTPTransport``: ``requests`` lists ``(method, path)`` of every request
that reached the transport (the last hop before the socket); ``fail`` makes matching requests raise a network
error; ``corrupt`` forwards a request to the daemon and replaces the answer's body; ``cut_events`` ends an event
stream cleanly right after a frame that contains a marker, and answers the reconnects as told.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
import httpx2
import pytest
from anyio.lowlevel import checkpoint

from acp_server.bridge import SessionBridge
from acp_server.cli._stdio import open_bridge
from acp_server.client import DaemonPendingPromptLimitError
from acp_server.config import Settings
from acp_server.daemon import Daemon, DaemonOptions, daemon_modes, open_daemon
from acp_server.modes import READ_ONLY_MODE
from acp_server.provider.offline import HangAfterHeaders, LoopbackModel


@dataclass
class Served:
    url: str
    daemon: Daemon
    bridge: SessionBridge

    def pending(self, session_id: str) -> int:
        """The daemon's own count (the authority) of the session's pending prompts."""
        return self.bridge.get(session_id).pending_prompt_count

    def last_event_id(self, session_id: str) -> int:
        return self.daemon.event_log(session_id).last_id


@asynccontextmanager
async def running_daemon(
    model: LoopbackModel | None, *, settings: Settings | None = None, token: str | None = None, **options: Any
) -> AsyncIterator[Served]:
    base = settings or Settings()
    if model is not None:
        base = replace(base, base_url=model.base_url, model=base.model or "m")
    modes = daemon_modes(token=token, allow_bypass_permissions=base.allow_bypass_permissions)
    if not token:  # what ``acp-server serve`` does: a tokenless daemon only reads
        base = replace(base, default_mode=READ_ONLY_MODE)
    options_ = DaemonOptions(port=0, token=token, **options)
    async with open_bridge(base, modes=modes) as bridge, open_daemon(bridge, options_) as run:
        yield Served(run.url, run.daemon, bridge)


async def wait_pending(pending: Callable[[], int], count: int) -> None:
    """Until ``count`` prompts hold local slots (a prompt reserves before its first await)."""
    with anyio.fail_after(5):
        while pending() != count:
            await checkpoint()


async def assert_released_once(
    send: Callable[[str], Awaitable[object]],
    pending: Callable[[], int],
    limit: int | None,
    rec: Recorder,
    model: LoopbackModel,
) -> None:
    """The slot came back: ``limit`` new prompts are admitted locally. It came back once: one more is refused
    locally with ``pending_count == limit`` and nothing sent (a double release would let ``limit + 1`` through)."""
    assert limit is not None
    assert pending() == 0
    model.enqueue(HangAfterHeaders())  # the first held prompt never ends; the others wait behind it
    async with anyio.create_task_group() as tg:
        for i in range(limit):
            tg.start_soon(send, f"held {i}")
        await wait_pending(pending, limit)
        sent = len(rec.requests)
        with pytest.raises(DaemonPendingPromptLimitError) as refused:
            await send("one too many")
        assert (refused.value.limit, refused.value.pending_count) == (limit, limit)
        assert len(rec.requests) == sent  # refused locally: nothing sent
        tg.cancel_scope.cancel()
    assert pending() == 0


class _CutStream(httpx2.AsyncByteStream):
    """The daemon's event stream, ended cleanly right after the first frame containing the marker ``marker()``
    returns at that moment (None: no cut)."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, marker: Callable[[], bytes | None], on_cut: Callable[[], None]
    ) -> None:
        self._inner = inner
        self._marker = marker
        self._on_cut = on_cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk
            marker = self._marker()
            if marker is not None and marker in chunk:  # the daemon sends whole frames
                self._on_cut()
                return

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Empty(httpx2.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in [b""][:0]:
            yield chunk


Reconnect = Literal["forward", "refuse", "empty"]


@dataclass
class Recorder(httpx2.AsyncBaseTransport):
    inner: httpx2.AsyncBaseTransport = field(default_factory=httpx2.AsyncHTTPTransport)
    requests: list[tuple[str, str]] = field(default_factory=list)
    last_event_ids: list[str | None] = field(default_factory=list)  # Last-Event-ID of each events request
    _failures: list[tuple[str, str, Exception]] = field(default_factory=list)
    _corruptions: list[tuple[str, str, bytes]] = field(default_factory=list)
    _cut_marker: bytes | None = None
    _reconnect: Reconnect = "forward"
    cut: anyio.Event = field(default_factory=anyio.Event)

    def count(self, method: str, suffix: str = "") -> int:
        return sum(1 for m, p in self.requests if m == method and p.endswith(suffix))

    def fail(self, method: str, suffix: str, error: Exception) -> None:
        self._failures.append((method, suffix, error))

    def clear_faults(self) -> None:
        self._failures.clear()
        self._corruptions.clear()

    def corrupt(self, method: str, suffix: str, body: bytes) -> None:
        self._corruptions.append((method, suffix, body))

    def cut_events(self, marker: str, reconnect: Reconnect) -> None:
        """End the event stream that next sends a frame containing ``marker``; answer reconnects per ``reconnect``
        (``refuse``: a connect error; ``empty``: a 200 event stream that ends at once; ``forward``: the daemon)."""
        self._cut_marker = marker.encode()
        self._reconnect = reconnect

    def _on_cut(self) -> None:
        self._cut_marker = None
        self.cut.set()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        method, path = request.method, request.url.path
        self.requests.append((method, path))
        if path.endswith("/events"):
            self.last_event_ids.append(request.headers.get("last-event-id"))
        for m, suffix, error in self._failures:
            if m == method and path.endswith(suffix):
                raise error
        if method == "GET" and path.endswith("/events") and self.cut.is_set():
            if self._reconnect == "refuse":
                raise httpx2.ConnectError("connection refused (injected)", request=request)
            if self._reconnect == "empty":
                return httpx2.Response(
                    200, headers={"content-type": "text/event-stream"}, stream=_Empty(), request=request
                )
        response = await self.inner.handle_async_request(request)
        for m, suffix, body in self._corruptions:
            if m == method and path.endswith(suffix):
                await response.aread()
                return httpx2.Response(
                    response.status_code, headers={"content-type": "application/json"}, content=body, request=request
                )
        if method == "GET" and path.endswith("/events"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _CutStream(response.stream, lambda: self._cut_marker, self._on_cut)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
