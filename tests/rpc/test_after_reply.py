"""``RequestPeer.after_reply``: a notification that follows its request's result at once, never before it, and is
dropped when the request answers an error or is cancelled."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_server.errors import InvalidInputError
from acp_server.rpc import Dispatcher, RequestPeer

from .test_dispatcher import Sink, req

pytestmark = pytest.mark.anyio


async def _answers(params: Any, peer: RequestPeer) -> Any:
    peer.after_reply("session/update", {"n": 1})
    await peer.notify("session/update", {"before": True})  # sent now: before the answer
    peer.after_reply("session/update", {"n": 2})
    await asyncio.sleep(0)
    return {"ok": True}


async def _refuses(params: Any, peer: RequestPeer) -> Any:
    peer.after_reply("session/update", {"n": 1})
    raise InvalidInputError("no", [{"field": "x", "message": "no"}])


class Waits:
    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def __call__(self, params: Any, peer: RequestPeer) -> Any:
        peer.after_reply("session/update", {"n": 1})
        self.started.set()
        await asyncio.Event().wait()


async def test_the_followers_come_right_after_the_result_in_order() -> None:
    sink = Sink()
    dispatcher = Dispatcher(sink)
    dispatcher.register({"answers": _answers}, {})
    dispatcher.feed(req(1, "answers"))
    messages = await sink.until(4)
    assert [m.get("params") if "method" in m else m.get("result") for m in messages] == [
        {"before": True},
        {"ok": True},
        {"n": 1},
        {"n": 2},
    ]


async def test_an_error_or_a_cancellation_drops_the_followers() -> None:
    sink = Sink()
    dispatcher = Dispatcher(sink)
    waits = Waits()
    dispatcher.register({"refuses": _refuses, "waits": waits}, {})
    dispatcher.feed(req(1, "refuses"))
    dispatcher.feed(req(2, "waits"))
    await sink.until(1)
    async with asyncio.timeout(5):
        await waits.started.wait()
    assert dispatcher.cancel_request(2)
    messages = await sink.until(2)  # a follower would be written with its reply, in the same callback
    assert [m.get("id") for m in messages] == [1, 2]
    assert all("method" not in m for m in sink.messages)  # no follower went out
    assert dispatcher._followers == {}  # nothing kept for them
