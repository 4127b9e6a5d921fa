"""The routed connection of request/response transports: a notification reaches the exchange of the request whose
handler sent it — never another request's, even of the same session, even while an earlier one is still open."""

from __future__ import annotations

import anyio
import pytest

from acp_server.rpc import RoutedConnection

pytestmark = pytest.mark.anyio


def update(session_id: str, text: str) -> dict[str, object]:
    content = {"type": "text", "text": text}
    params = {"sessionId": session_id, "update": {"sessionUpdate": "agent_message_chunk", "content": content}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


async def test_updates_go_to_the_request_that_sent_them_not_to_the_oldest_open_one() -> None:
    routed = RoutedConnection()
    first = routed.open_exchange(1)  # a prompt whose reader is still draining it
    second = routed.open_exchange(2)  # the next prompt of the same session
    await routed.send(update("s", "from the second"), origin=2)
    routed.put({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}})
    routed.put({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})
    with anyio.fail_after(1):
        got_second = [message async for message in second]
        got_first = [message async for message in first]
    routed.forget(first)
    routed.forget(second)
    done = {"stopReason": "end_turn"}
    assert got_second == [update("s", "from the second"), {"jsonrpc": "2.0", "id": 2, "result": done}]
    assert got_first == [{"jsonrpc": "2.0", "id": 1, "result": done}]


async def test_a_notification_for_a_request_that_left_is_dropped_not_misrouted() -> None:
    routed = RoutedConnection()
    left = routed.open_exchange(1)
    other = routed.open_exchange(2)
    routed.forget(left)  # its HTTP client went away
    await routed.send(update("s", "for the one that left"), origin=1)
    routed.put({"jsonrpc": "2.0", "id": 2, "result": {}})
    with anyio.fail_after(1):
        got = [message async for message in other]
    routed.forget(other)
    assert got == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
