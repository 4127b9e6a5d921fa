"""Requests from the agent to its client (``Dispatcher.request`` / ``RequestPeer.request``): sent in order with the
handler's notifications, answered by the client's response (result, or :class:`RemoteError`), forgotten when the
caller is cancelled, failed when the connection closes; stray and malformed responses are logged, never answered."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from acp_server.errors import RemoteError, ServerError
from acp_server.rpc import Channel, Dispatcher, Outbox, RequestPeer, is_response, to_rpc_error

from .test_dispatcher import Sink, req
from .test_routed import Routed

pytestmark = pytest.mark.anyio

Message = dict[str, Any]
READ = {"sessionId": "s", "path": "/tmp/a.txt"}


def result(msg_id: Any, value: Any) -> Message:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def error(msg_id: Any, code: int, message: str, data: Any = None) -> Message:
    body: Message = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": body}


async def sent_request(sink: Sink, index: int = 0) -> Message:
    """The ``index``-th request the agent sent (waits for it)."""
    async with asyncio.timeout(5):
        while True:
            requests = [m for m in sink.messages if "method" in m and "id" in m]
            if len(requests) > index:
                return requests[index]
            await sink.until(len(sink.messages) + 1)


class Asker:
    """A request handler that asks the client (``fs/read_text_file``) and answers with what it got."""

    def __init__(self) -> None:
        self.outcomes: list[Any] = []
        self.cancelled = asyncio.Event()
        self.done = asyncio.Event()

    async def ask(self, params: Any, peer: RequestPeer) -> Any:
        try:
            answer = await peer.request("fs/read_text_file", params)
        except RemoteError as failure:
            self.outcomes.append(failure)
            self.done.set()
            return {"failed": str(failure), "code": failure.code}
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        self.outcomes.append(answer)
        return {"got": answer}

    async def chatty_ask(self, params: Any, peer: RequestPeer) -> Any:
        await peer.notify("session/update", {"n": 1})
        answer = await peer.request("session/request_permission", {"n": 2})
        await peer.notify("session/update", {"n": 3})
        return answer


def make(sink: Any) -> tuple[Dispatcher, Asker]:
    dispatcher = Dispatcher(sink)
    asker = Asker()
    dispatcher.register({"ask": asker.ask, "chatty_ask": asker.chatty_ask}, {})
    return dispatcher, asker


async def test_a_handler_request_goes_out_on_behalf_of_its_request_and_returns_the_result() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed(req(1, "ask", READ))
    outgoing = await sent_request(sink)
    assert set(outgoing) == {"jsonrpc", "id", "method", "params"}
    assert (outgoing["jsonrpc"], outgoing["method"], outgoing["params"]) == ("2.0", "fs/read_text_file", READ)
    assert isinstance(outgoing["id"], str) and outgoing["id"].startswith("acp-server:")  # never a client id
    assert sink.via == ["send"] and sink.origins == [1]  # with backpressure, routed by the request that sent it
    dispatcher.feed(result(outgoing["id"], {"content": "hello"}))
    await sink.until(2)
    assert sink.messages[1] == result(1, {"got": {"content": "hello"}})
    assert dispatcher._outgoing == {}
    await dispatcher.aclose()


async def test_each_request_gets_its_own_id_and_its_own_response_in_any_order() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed(req(1, "ask", {"n": 1}))
    dispatcher.feed(req(2, "ask", {"n": 2}))
    first, second = await sent_request(sink, 0), await sent_request(sink, 1)
    assert first["id"] != second["id"]
    dispatcher.feed(result(second["id"], "two"))
    dispatcher.feed(result(first["id"], "one"))
    await sink.until(4)
    assert (first["params"], second["params"]) == ({"n": 1}, {"n": 2})
    assert sink.replies(1) == [result(1, {"got": "one"})]
    assert sink.replies(2) == [result(2, {"got": "two"})]


async def test_an_error_response_raises_remote_error_with_the_client_code_message_and_data() -> None:
    sink = Sink()
    dispatcher = Dispatcher(sink)
    waiting = asyncio.ensure_future(dispatcher.request("fs/read_text_file", READ))
    outgoing = await sent_request(sink)
    data = {"path": "/tmp/a.txt"}
    dispatcher.feed(error(outgoing["id"], -32002, "Resource not found: /tmp/a.txt", data))
    with pytest.raises(RemoteError) as caught:
        async with asyncio.timeout(5):
            await waiting
    failure = caught.value
    assert str(failure) == "fs/read_text_file failed: Resource not found: /tmp/a.txt"
    assert (failure.code, failure.data) == (-32002, data)
    assert isinstance(failure, ServerError) and failure.error_kind == "client_error"
    wire = to_rpc_error(failure).to_wire()  # as our own reply would carry it: no traceback, the client's code kept
    assert wire["message"] == str(failure)
    assert wire["data"] == {"errorKind": "client_error", "clientCode": -32002, "retryable": False}
    assert failure.__cause__ is None and "Traceback" not in json.dumps(wire)
    assert sink.messages == [outgoing]  # a response is never answered


async def test_a_response_arriving_while_the_request_still_waits_for_backpressure_is_not_lost() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()  # the transport has queued the request but holds the sender back
    dispatcher, _ = make(sink)
    dispatcher.feed(req(1, "ask", READ))
    outgoing = await sent_request(sink)
    dispatcher.feed(result(outgoing["id"], "quick"))  # the client read it and answered already
    sink.gate.set()
    await sink.until(2)
    assert sink.messages[1] == result(1, {"got": "quick"})


async def test_cancelling_the_waiting_handler_forgets_the_request_and_its_late_response_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Sink()
    dispatcher, asker = make(sink)
    dispatcher.feed(req(7, "ask", READ))
    outgoing = await sent_request(sink)
    assert list(dispatcher._outgoing) == [outgoing["id"]]
    assert dispatcher.cancel_request(7)  # the prompt was cancelled
    await sink.until(2)
    assert asker.cancelled.is_set()
    assert sink.messages[1]["id"] == 7 and sink.messages[1]["error"]["code"] == -32800
    assert dispatcher._outgoing == {}  # removed at once, not when (if ever) the client answers
    with caplog.at_level(logging.DEBUG, logger="acp_server.rpc"):
        dispatcher.feed(result(outgoing["id"], "too late"))
    assert any("no pending request" in r.getMessage() and outgoing["id"] in r.getMessage() for r in caplog.records)
    dispatcher.feed(req(8, "ask", READ))  # replies are in order: anything owed to the late response would come first
    await sent_request(sink, 1)
    assert len(sink.messages) == 3 and asker.outcomes == []


async def test_a_direct_caller_cancelled_while_the_sink_holds_it_back_leaves_nothing_pending() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()
    dispatcher = Dispatcher(sink)
    waiting = asyncio.ensure_future(dispatcher.request("terminal/output", {"terminalId": "t"}))
    outgoing = await sent_request(sink)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert dispatcher._outgoing == {}
    dispatcher.feed(result(outgoing["id"], {"output": ""}))  # ignored, no crash
    assert sink.messages == [outgoing]


async def test_an_abandoned_request_hands_its_late_result_to_on_late_and_a_posted_request_is_answered_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Sink()
    dispatcher = Dispatcher(sink)
    late: list[Any] = []
    waiting = asyncio.ensure_future(dispatcher.request("terminal/create", {"command": "x"}, on_late=late.append))
    outgoing = await sent_request(sink)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert dispatcher._outgoing == {}
    dispatcher.feed(error(outgoing["id"], -32603, "nope"))  # an error answer: nothing to undo
    assert late == []
    waiting = asyncio.ensure_future(dispatcher.request("terminal/create", {"command": "y"}, on_late=late.append))
    outgoing = await sent_request(sink, 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    dispatcher.feed(result(outgoing["id"], {"terminalId": "t1"}))
    assert late == [{"terminalId": "t1"}]
    dispatcher.post_request("terminal/release", {"terminalId": "t1"})
    posted = sink.messages[-1]
    assert (posted["method"], posted["params"]) == ("terminal/release", {"terminalId": "t1"})
    with caplog.at_level(logging.DEBUG, logger="acp_server.rpc"):
        dispatcher.feed(result(posted["id"], None))
    assert not any("no pending request" in r.getMessage() for r in caplog.records)  # awaited by no one, expected
    await dispatcher.aclose()
    dispatcher.post_request("terminal/release", {"terminalId": "t2"})  # closed: nothing is sent
    assert sink.messages[-1] is posted and dispatcher._late == {}


async def test_a_response_to_no_pending_request_is_ignored_even_with_the_id_of_a_client_request_in_flight() -> None:
    """The client's ids and ours are separate spaces: its response ``id: 5`` must not touch its own request 5."""
    sink = Sink()
    dispatcher, asker = make(sink)
    dispatcher.feed(req(5, "ask", READ))
    outgoing = await sent_request(sink)
    strays = [result(5, "x"), error(5, -32603, "x"), result("acp-server:999", "x"), result(outgoing["id"] + "0", 1)]
    for stray in strays:
        dispatcher.feed(stray)
    assert asker.outcomes == [] and sink.messages == [outgoing]
    assert 5 in dispatcher._tasks  # the client's request is still running
    dispatcher.feed(result(outgoing["id"], "right one"))
    await sink.until(2)
    assert sink.messages[1] == result(5, {"got": "right one"})


MALFORMED: list[tuple[str, Any]] = [
    ("result and error", lambda i: {"jsonrpc": "2.0", "id": i, "result": 1, "error": {"code": 1, "message": "m"}}),
    ("neither result nor error", lambda i: {"jsonrpc": "2.0", "id": i}),
    ("error not an object", lambda i: {"jsonrpc": "2.0", "id": i, "error": "bad"}),
    ("error without a code", lambda i: {"jsonrpc": "2.0", "id": i, "error": {"message": "m"}}),
    ("error code a string", lambda i: {"jsonrpc": "2.0", "id": i, "error": {"code": "1", "message": "m"}}),
    ("error without a message", lambda i: {"jsonrpc": "2.0", "id": i, "error": {"code": 1}}),
    ("missing jsonrpc", lambda i: {"id": i, "result": 1}),
    ("wrong jsonrpc", lambda i: {"jsonrpc": "1.0", "id": i, "result": 1}),
    ("id an object", lambda i: {"jsonrpc": "2.0", "id": {"id": i}, "result": 1}),
    ("id a float", lambda i: {"jsonrpc": "2.0", "id": 1.5, "result": 1}),
    ("no id", lambda i: {"jsonrpc": "2.0", "result": 1}),
    ("null id with a result", lambda i: {"jsonrpc": "2.0", "id": None, "result": 1}),
]


@pytest.mark.parametrize(("name", "build"), MALFORMED, ids=[name for name, _ in MALFORMED])
async def test_a_malformed_response_is_logged_never_answered_and_fails_the_request_it_names(
    name: str, build: Any, caplog: pytest.LogCaptureFixture
) -> None:
    sink = Sink()
    dispatcher, asker = make(sink)
    dispatcher.feed(req(1, "ask", READ))
    outgoing = await sent_request(sink)
    bad = build(outgoing["id"])
    assert is_response(bad)
    with caplog.at_level(logging.DEBUG, logger="acp_server.rpc"):
        dispatcher.feed(bad)
    assert any("malformed response" in r.getMessage() for r in caplog.records)
    if bad.get("id") == outgoing["id"]:
        # It names our request: that request fails at once (it must not wait for an answer that will not come).
        await sink.until(2)
        assert dispatcher._outgoing == {}
        assert len(asker.outcomes) == 1 and isinstance(asker.outcomes[0], RemoteError)
        assert "malformed" in str(asker.outcomes[0]) and sink.messages[1]["id"] == 1
        return
    assert sink.messages == [outgoing] and asker.outcomes == []  # nothing answered, the request still waits
    assert list(dispatcher._outgoing) == [outgoing["id"]]
    dispatcher.feed(result(outgoing["id"], "fine"))
    await sink.until(2)
    assert sink.messages[1] == result(1, {"got": "fine"})


def test_is_response_tells_responses_from_requests_notifications_and_junk() -> None:
    assert is_response({"jsonrpc": "2.0", "id": 1, "result": None})
    assert is_response({"id": 1})
    assert is_response({"error": {}})
    assert not is_response({"jsonrpc": "2.0", "id": 1, "method": "m"})
    assert not is_response({"jsonrpc": "2.0", "method": "m", "result": 1})  # a (malformed) request: answered
    assert not is_response({"jsonrpc": "2.0"})
    assert not is_response({})
    assert not is_response([{"id": 1, "result": 1}])
    assert not is_response(None)


async def test_aclose_fails_every_pending_request_and_refuses_new_ones_without_sending() -> None:
    sink = Sink()
    dispatcher, asker = make(sink)
    dispatcher.feed(req(1, "ask", READ))
    direct = asyncio.ensure_future(dispatcher.request("terminal/wait_for_exit", {"terminalId": "t"}))
    await sent_request(sink, 1)
    async with asyncio.timeout(5):
        await dispatcher.aclose(grace_s=30)  # the handler is not waited for: its request fails at once
    with pytest.raises(RemoteError) as caught:
        await direct
    assert caught.value.code is None
    assert str(caught.value) == "connection closed before the client answered terminal/wait_for_exit"
    [failure] = asker.outcomes
    assert isinstance(failure, RemoteError) and failure.code is None
    assert str(failure).startswith("connection closed")
    assert sink.replies(1) == [
        result(1, {"failed": "connection closed before the client answered fs/read_text_file", "code": None})
    ]
    assert dispatcher._outgoing == {}
    count = len(sink.messages)
    with pytest.raises(RemoteError, match=r"^connection closed") as refused:
        await dispatcher.request("fs/write_text_file", {"path": "/tmp/x", "content": ""})
    assert refused.value.code is None
    assert len(sink.messages) == count  # nothing was sent to a client that is gone


async def test_a_notification_sent_before_a_request_is_written_before_it_and_the_reply_after_both() -> None:
    outbox = Outbox()
    dispatcher, _ = make(outbox)
    written: list[Message] = []
    arrived = asyncio.Event()

    async def write(data: bytes) -> None:
        written.extend(json.loads(line) for line in data.splitlines())
        arrived.set()

    async def until(count: int) -> None:
        async with asyncio.timeout(5):
            while len(written) < count:
                arrived.clear()
                await arrived.wait()

    pump = asyncio.ensure_future(outbox.pump(write))
    dispatcher.feed(req(3, "chatty_ask"))
    await until(2)
    note, asked = written
    assert note == {"jsonrpc": "2.0", "method": "session/update", "params": {"n": 1}}
    assert asked["method"] == "session/request_permission" and asked["params"] == {"n": 2}
    dispatcher.feed(result(asked["id"], {"outcome": {"outcome": "cancelled"}}))
    await until(4)
    assert written[2:] == [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"n": 3}},
        result(3, {"outcome": {"outcome": "cancelled"}}),
    ]
    outbox.close()
    await pump


# -- routed connections (the remote transports) -----------------------------------------------------------------


async def receive(channel: Channel) -> Message:
    async with asyncio.timeout(5):
        return await channel.receive()


async def test_routed_a_request_goes_on_the_channel_of_the_request_whose_handler_sent_it() -> None:
    fallback, session, other = Channel("connection"), Channel("session"), Channel("other")
    routed = Routed(fallback)
    asker = Asker()
    routed.dispatcher.register({"ask": asker.ask}, {})
    routed.submit(req("p", "ask", READ), session)
    routed.submit(req("q", "ask", READ), other)
    asked, asked_other = await receive(session), await receive(other)
    assert asked["method"] == asked_other["method"] == "fs/read_text_file" and asked["id"] != asked_other["id"]
    assert len(fallback) == 0
    routed.submit(result(asked["id"], "for p"), fallback)  # the client answers on whichever stream (matched by id)
    assert await receive(session) == result("p", {"got": "for p"})
    assert len(other) == 0 and len(fallback) == 0
    routed.submit(result(asked_other["id"], "for q"), session)
    assert await receive(other) == result("q", {"got": "for q"})
    assert len(session) == 0 and len(fallback) == 0


async def test_routed_a_request_whose_channel_is_closed_fails_at_once() -> None:
    fallback, session = Channel("connection"), Channel("session")
    routed = Routed(fallback)
    asker = Asker()
    routed.dispatcher.register({"ask": asker.ask}, {})
    session.close()  # e.g. the session's stream ended (session/close) or the connection was dropped
    routed.submit(req("p", "ask", READ), session)
    async with asyncio.timeout(5):
        await asker.done.wait()
    [failure] = asker.outcomes
    assert isinstance(failure, RemoteError) and failure.code is None
    assert str(failure) == "connection closed: stream session ended before fs/read_text_file was sent"
    assert routed.dispatcher._outgoing == {}
    await routed.dispatcher.aclose()


async def test_routed_a_request_waits_while_its_channel_is_full() -> None:
    fallback, session = Channel("connection"), Channel("session", capacity=1)
    routed = Routed(fallback)
    asker = Asker()
    routed.dispatcher.register({"chatty_ask": asker.chatty_ask}, {})
    routed.submit(req("p", "chatty_ask"), session)
    async with asyncio.timeout(5):
        while not len(session):
            await session._readable.wait()
    for _ in range(10):
        await asyncio.sleep(0)  # give the handler every chance to run ahead (it must not)
    assert [m["method"] for m in session._queue] == ["session/update"]  # the request is not queued yet
    assert (await receive(session))["method"] == "session/update"
    asked = await receive(session)
    assert asked["method"] == "session/request_permission"
    routed.submit(result(asked["id"], "ok"), fallback)
    assert (await receive(session))["params"] == {"n": 3}
    assert await receive(session) == result("p", "ok")


async def test_a_response_too_large_to_read_fails_the_request_it_names_and_no_other() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed(req(1, "ask", READ))
    dispatcher.feed(req(2, "ask", READ))
    first = await sent_request(sink)
    second = await sent_request(sink, 1)
    edges = b'{"jsonrpc":"2.0","id":"' + first["id"].encode() + b'","result":{"content":"xxxx\nxxxx"}}'
    dispatcher.refuse_oversized(99_000_000, 1000, edges)
    await sink.until(4)
    assert sink.messages[2]["id"] is None and sink.messages[2]["error"]["code"] == -32600
    assert sink.messages[3]["id"] == 1 and "exceeds the 1000-byte limit" in sink.messages[3]["result"]["failed"]
    assert list(dispatcher._outgoing) == [second["id"]]  # the other request still waits for its answer
    dispatcher.feed(result(second["id"], "fine"))
    await sink.until(5)
    assert sink.messages[4] == result(2, {"got": "fine"})
