"""The ``text/event-stream`` response of ``GET /session/{id}/events``: one subscription, written in order.

The response runs in two tasks: its own writes the frames in order; one helper listens for the client's disconnect
and, when nothing was written for ``heartbeat_s``, has the writer send a comment (one timer per stream, re-armed
once per heartbeat, not one per frame). A drop needs no task: the subscription's ``on_drop`` ends the stream. The
stream ends cleanly when the log closes (after the last frame), and at once when the client leaves. A subscription
dropped for lagging (its peer reads too slowly, or not at all) has its connection *aborted* (reset: nothing more is
written, the kernel's queues are freed), as has a stream whose final write cannot be flushed within
``_FINISH_TIMEOUT_S`` — a polite end would keep the socket and its buffers for as long as the peer does not read.
Its kernel send buffer is capped at :data:`SEND_BUFFER_BYTES`: what a peer that stops reading holds in the kernel is
bounded, and its queue here fills (and drops it) sooner.
"""

from __future__ import annotations

import logging
import time

import anyio
import anyio.lowlevel
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._sse_frames import HEARTBEAT
from ..server import ABORT_EXTENSION
from ._disconnect import wait_disconnected
from ._event_log import Subscription

__all__ = ["SEND_BUFFER_BYTES", "EventStreamResponse"]

logger = logging.getLogger("acp_server.daemon")

_FINISH_TIMEOUT_S = 1.0
SEND_BUFFER_BYTES = 256 * 1024
"""The kernel send buffer of an event stream's connection (``SO_SNDBUF``; Linux books twice this)."""


class EventStreamResponse(Response):
    """Streams a :class:`Subscription` as SSE; always closes the subscription, however the response ends."""

    media_type = "text/event-stream"

    def __init__(self, subscription: Subscription, *, session_id: str, heartbeat_s: float) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self._subscription = subscription
        self._session_id = session_id
        self._heartbeat_s = heartbeat_s
        self._written_at = 0.0  # time.monotonic() when the writer last started a write (or started)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        subscription = self._subscription
        transport = scope.get("extensions", {}).get(ABORT_EXTENSION, {})
        abort = transport.get("abort")
        if (cap_send_buffer := transport.get("send_buffer")) is not None:
            cap_send_buffer(SEND_BUFFER_BYTES)
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async with anyio.create_task_group() as tg:
                stop = tg.cancel_scope

                def dropped() -> None:
                    logger.warning("event stream of session %s dropped: the subscriber fell behind", self._session_id)
                    stop.cancel()

                subscription.on_drop = dropped
                if subscription.dropped:
                    dropped()
                self._written_at = time.monotonic()
                tg.start_soon(self._watch, receive, stop)
                try:
                    await self._write(send)
                finally:
                    subscription.on_drop = None
                stop.cancel()
            if subscription.dropped and abort is not None:
                abort()
                with anyio.CancelScope(shield=True):
                    await anyio.lowlevel.checkpoint()  # let the server see the connection lost before we return
                return
            # Ended by the log or a disconnect: close the body (a no-op once the client is gone).
            with anyio.move_on_after(_FINISH_TIMEOUT_S, shield=True) as finishing:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            if finishing.cancelled_caught and abort is not None:
                abort()  # the peer does not read: do not keep its socket
                with anyio.CancelScope(shield=True):
                    await anyio.lowlevel.checkpoint()
        finally:
            subscription.close()

    async def _write(self, send: Send) -> None:
        subscription = self._subscription
        while True:
            frames = await subscription.receive()
            if frames is None:
                return
            self._written_at = time.monotonic()
            body = b"".join(frames) if frames else HEARTBEAT  # [] : the heartbeat's nudge
            await send({"type": "http.response.body", "body": body, "more_body": True})

    async def _watch(self, receive: Receive, stop: anyio.CancelScope) -> None:
        """End the stream when the client leaves; nudge the writer once nothing was written for ``heartbeat_s`` (a
        writer busy sending is left alone, and nudged again a heartbeat later at the earliest)."""
        nudged_at = self._written_at
        while True:
            due = max(self._written_at, nudged_at) + self._heartbeat_s
            with anyio.move_on_after(due - time.monotonic()):  # receive is cancel-safe (BodyLimit times it out too)
                await wait_disconnected(receive)
                stop.cancel()
                return
            now = time.monotonic()
            if now >= self._written_at + self._heartbeat_s:
                self._subscription.nudge()
                nudged_at = now
