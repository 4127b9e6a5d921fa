"""The routed connection of remote transports: a request's response and the notifications its handler sends go to
the channel named when it was submitted — never another request's channel, even of the same session; channels keep
order, hold back senders when full (replies never wait), and report overflow and unread messages."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_server.rpc import Channel, Dispatcher, RoutedConnection

pytestmark = pytest.mark.anyio


class Routed(RoutedConnection):
    """A routed connection and its dispatcher, wired as a face wires them: each message routed, then dispatched."""

    def __init__(self, fallback: Channel) -> None:
        super().__init__(fallback)
        self.dispatcher = Dispatcher(self)

    def submit(self, message: dict[str, Any], channel: Channel) -> None:
        if self.route(message, channel):
            self.dispatcher.feed(message)


def update(session_id: str, text: str) -> dict[str, object]:
    content = {"type": "text", "text": text}
    params = {"sessionId": session_id, "update": {"sessionUpdate": "agent_message_chunk", "content": content}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def drain(channel: Channel) -> list[dict[str, Any]]:
    got = []
    while len(channel):
        got.append(channel._queue.popleft())
    return got


async def test_answers_and_updates_go_to_the_channel_of_their_request() -> None:
    fallback, first, second = Channel("connection"), Channel("a"), Channel("b")
    routed = RoutedConnection(fallback)
    routed._routes.update({1: first, 2: second})  # two in-flight requests (submit() would dispatch them)
    await routed.send(update("s", "from the second"), origin=2)
    routed.put({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}})
    routed.put({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    routed.put({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}})
    await routed.send(update("s", "on behalf of nobody"))
    done = {"stopReason": "end_turn"}
    assert drain(second) == [update("s", "from the second"), {"jsonrpc": "2.0", "id": 2, "result": done}]
    assert drain(first) == [{"jsonrpc": "2.0", "id": 1, "result": done}]
    assert [m.get("id", "update") for m in drain(fallback)] == [None, "update"]


async def test_a_request_id_in_flight_is_refused_on_the_new_channel() -> None:
    fallback, first, second = Channel("connection"), Channel("a"), Channel("b")
    routed = Routed(fallback)
    routed._routes[7] = first
    routed.submit({"jsonrpc": "2.0", "id": 7, "method": "x", "params": {}}, second)
    (refusal,) = drain(second)
    assert refusal["id"] == 7 and refusal["error"]["code"] == -32600
    assert routed._routes[7] is first


async def test_a_full_channel_holds_the_sender_until_the_reader_takes_one_replies_never_wait() -> None:
    channel = Channel("s", capacity=2)
    await channel.send(update("s", "1"))
    await channel.send(update("s", "2"))
    channel.put({"jsonrpc": "2.0", "id": 1, "result": {}})  # over capacity: a reply is queued anyway
    assert len(channel) == 3
    sent = anyio.Event()

    async def third() -> None:
        await channel.send(update("s", "3"))
        sent.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(third)
        await anyio.wait_all_tasks_blocked()
        assert not sent.is_set()
        assert (await channel.receive())["params"]["update"]["content"]["text"] == "1"
        assert (await channel.receive())["params"]["update"]["content"]["text"] == "2"
        await sent.wait()
    assert (await channel.receive())["id"] == 1
    assert (await channel.receive())["params"]["update"]["content"]["text"] == "3"


async def test_close_drains_then_ends_and_discards_what_comes_after() -> None:
    channel = Channel("s")
    await channel.send(update("s", "kept"))
    channel.close()
    await channel.send(update("s", "discarded"))
    channel.put({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert (await channel.receive())["params"]["update"]["content"]["text"] == "kept"
    with pytest.raises(anyio.EndOfStream):
        await channel.receive()


async def test_unread_messages_and_overflow_are_reported() -> None:
    queued: list[int] = []
    overflowed: list[str] = []
    channel = Channel(
        "s",
        capacity=1,
        hard_limit=2,
        on_queued=lambda c: queued.append(len(c)),
        on_overflow=lambda c: overflowed.append(c.name),
    )
    for i in range(4):
        channel.put({"jsonrpc": "2.0", "id": i, "result": {}})
    assert queued == [1, 2, 3, 4]  # no reader attached: the owner hears of each
    assert overflowed == ["s"]  # once
    channel.attached = True
    channel.put({"jsonrpc": "2.0", "id": 9, "result": {}})
    assert queued == [1, 2, 3, 4]
