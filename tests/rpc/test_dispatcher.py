"""The :class:`Dispatcher` in-process: parsed messages in, whole reply dicts out to a fake sink."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from acp_server.errors import InvalidInputError
from acp_server.rpc import Dispatcher, RequestPeer

pytestmark = pytest.mark.anyio

Message = dict[str, Any]


class Sink:
    """A MessageSink that collects messages in order; ``put`` for replies, ``send`` for notifications."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.via: list[str] = []
        self.origins: list[Any] = []  # the request id each notification was sent on behalf of
        self.gate: asyncio.Event | None = None  # when set up, ``send`` waits for it (a reader that is not reading)
        self._changed = asyncio.Event()

    def put(self, message: Message) -> None:
        self.messages.append(message)
        self.via.append("put")
        self._changed.set()

    async def send(self, message: Message, origin: Any = None) -> None:
        self.messages.append(message)
        self.origins.append(origin)
        self.via.append("send")
        self._changed.set()
        if self.gate is not None:
            await self.gate.wait()

    def replies(self, msg_id: Any = ...) -> list[Message]:
        return [m for m in self.messages if "method" not in m and (msg_id is ... or m.get("id") == msg_id)]

    async def until(self, count: int) -> list[Message]:
        """Wait until at least ``count`` messages arrived."""
        async with asyncio.timeout(5):
            while len(self.messages) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.messages


def req(msg_id: Any, method: str, params: Any = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


class Handlers:
    """Request handlers the tests drive; each records what it got."""

    def __init__(self) -> None:
        self.peers: list[RequestPeer] = []
        self.params: list[Any] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.notes: list[tuple[Any, RequestPeer]] = []

    async def echo(self, params: Any, peer: RequestPeer) -> Any:
        self.params.append(params)
        self.peers.append(peer)
        return params

    async def fail(self, params: Any, peer: RequestPeer) -> Any:
        raise RuntimeError("secret detail in /home/user/acp_server/x.py line 3: Traceback (most recent call last)")

    async def invalid(self, params: Any, peer: RequestPeer) -> Any:
        raise InvalidInputError("Invalid params for x: cwd: required", [{"field": "cwd", "message": "required"}])

    async def block(self, params: Any, peer: RequestPeer) -> Any:
        self.started.set()
        await asyncio.Event().wait()

    async def wait(self, params: Any, peer: RequestPeer) -> Any:
        self.started.set()
        await self.release.wait()
        return "released"

    async def chatty(self, params: Any, peer: RequestPeer) -> Any:
        peer.admitted()
        await peer.notify("progress", {"n": 1})
        await peer.notify("progress", {"n": 2})
        return "done"

    def note(self, params: Any, peer: RequestPeer) -> None:
        self.notes.append((params, peer))


def make(sink: Sink, admitted: list[Any] | None = None) -> tuple[Dispatcher, Handlers]:
    handlers = Handlers()
    on_admitted = admitted.append if admitted is not None else None
    dispatcher = Dispatcher(sink, on_admitted=on_admitted)
    requests = {name: getattr(handlers, name) for name in ("echo", "fail", "invalid", "block", "wait", "chatty")}
    dispatcher.register(requests, {"note": handlers.note})
    return dispatcher, handlers


async def test_a_request_gets_exactly_one_reply_a_plain_dict_with_its_id_and_params_stay_dicts() -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    params = {"a": [1, {"b": None}], "c": "ü"}
    dispatcher.feed(req(7, "echo", params))
    await sink.until(1)
    await dispatcher.aclose()
    assert sink.messages == [{"jsonrpc": "2.0", "id": 7, "result": params}]
    assert sink.via == ["put"]
    assert type(sink.messages[0]) is dict  # handed whole, never encoded
    assert type(handlers.params[0]) is dict and type(handlers.params[0]["a"][1]) is dict
    json.dumps(sink.messages)  # plain JSON values only


@pytest.mark.parametrize("msg_id", [0, 12345678901234, "abc", ""])
async def test_string_and_integer_ids_come_back_unchanged(msg_id: Any) -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    dispatcher.feed(req(msg_id, "echo", {}))
    await sink.until(1)
    assert sink.replies() == [{"jsonrpc": "2.0", "id": msg_id, "result": {}}]
    assert handlers.peers[0].request_id == msg_id


async def test_an_unexpected_exception_is_an_internal_error_without_any_detail() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed(req(1, "fail"))
    await sink.until(1)
    [reply] = sink.messages
    assert reply == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32603, "message": "Internal error", "data": {"errorKind": "internal"}},
    }
    wire = json.dumps(reply)
    for leak in ("Traceback", "secret", ".py", "RuntimeError", "/home"):
        assert leak not in wire


async def test_a_domain_error_keeps_its_message_and_field_errors() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed(req(2, "invalid"))
    await sink.until(1)
    error = sink.messages[0]["error"]
    assert error["code"] == -32602
    assert error["message"] == "Invalid params for x: cwd: required"
    assert error["data"]["errorKind"] == "invalid_params"
    assert error["data"]["errors"] == [{"field": "cwd", "message": "required"}]


@pytest.mark.parametrize(
    "message",
    [
        [],
        "a string",
        {"jsonrpc": "2.0", "id": {"nested": 1}, "method": "echo"},
        {"jsonrpc": "2.0", "id": None, "method": "echo"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "echo"},
        {"jsonrpc": "2.0", "params": {}},
    ],
)
async def test_a_malformed_envelope_is_answered_invalid_request_with_id_null(message: Any) -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    dispatcher.feed(message)
    [reply] = sink.messages  # answered synchronously, once
    assert reply["id"] is None and "id" in reply
    assert reply["jsonrpc"] == "2.0"
    assert reply["error"]["code"] == -32600
    assert reply["error"]["data"] == {"errorKind": "invalid_request"}
    assert handlers.params == []


async def test_a_malformed_envelope_with_a_readable_id_is_answered_with_that_id() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed({"jsonrpc": "1.0", "id": 4, "method": "echo"})
    dispatcher.feed({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": 3})
    assert [(m["id"], m["error"]["code"]) for m in sink.messages] == [(4, -32600), (5, -32600)]


async def test_an_unknown_method_is_method_not_found_with_its_id() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed(req("q", "no/such"))
    assert sink.messages == [
        {
            "jsonrpc": "2.0",
            "id": "q",
            "error": {
                "code": -32601,
                "message": "Method not found: no/such",
                "data": {"errorKind": "method_not_found", "method": "no/such"},
            },
        }
    ]


async def test_unknown_notifications_and_stray_responses_are_ignored() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.feed({"jsonrpc": "2.0", "method": "no/such", "params": {}})
    dispatcher.feed({"jsonrpc": "2.0", "id": 99, "result": {}})
    dispatcher.feed({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    dispatcher.feed(req(1, "echo", {}))  # replies are in order: anything owed to the above would come first
    await sink.until(1)
    await dispatcher.aclose()
    assert sink.messages == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


async def test_a_notification_handler_gets_a_peer_without_request_id_and_is_never_answered() -> None:
    sink = Sink()
    admitted: list[Any] = []
    dispatcher, handlers = make(sink, admitted)
    dispatcher.feed({"jsonrpc": "2.0", "method": "note", "params": {"x": 1}})
    [(params, peer)] = handlers.notes  # synchronous handler: done when feed returns
    assert params == {"x": 1}
    assert peer.request_id is None
    peer.admitted()
    assert admitted == []  # only a request can be admitted
    dispatcher.feed(req(2, "echo", {}))
    await sink.until(1)
    assert sink.messages == [{"jsonrpc": "2.0", "id": 2, "result": {}}]


async def test_a_request_peer_carries_its_id_reports_admission_and_its_notifications_precede_the_reply() -> None:
    sink = Sink()
    admitted: list[Any] = []
    dispatcher, _ = make(sink, admitted)
    dispatcher.feed(req(11, "chatty"))
    await sink.until(3)
    assert admitted == [11]
    assert sink.messages == [
        {"jsonrpc": "2.0", "method": "progress", "params": {"n": 1}},
        {"jsonrpc": "2.0", "method": "progress", "params": {"n": 2}},
        {"jsonrpc": "2.0", "id": 11, "result": "done"},
    ]
    assert sink.via == ["send", "send", "put"]
    assert sink.origins == [11, 11]  # each notification names the request whose handler sent it


async def test_notify_waits_for_the_sink_backpressure() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()
    dispatcher, _ = make(sink)
    dispatcher.feed(req(1, "chatty"))
    await sink.until(1)
    for _ in range(10):
        await asyncio.sleep(0)  # give the handler every chance to run ahead (it must not)
    assert len(sink.messages) == 1  # the second notification waits for the first to be taken
    sink.gate.set()
    await sink.until(3)
    assert sink.messages[-1] == {"jsonrpc": "2.0", "id": 1, "result": "done"}


async def test_cancel_request_of_a_running_handler_answers_request_cancelled_once() -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    dispatcher.feed(req(5, "block"))
    async with asyncio.timeout(5):
        await handlers.started.wait()
    assert dispatcher.cancel_request(5) is True
    await sink.until(1)
    assert dispatcher.cancel_request(5) is False  # no longer in flight
    assert dispatcher.cancel_request(404) is False
    await dispatcher.aclose()
    assert sink.messages == [
        {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32800, "message": "Request cancelled", "data": {"errorKind": "request_cancelled"}},
        }
    ]


async def test_a_handler_can_cancel_another_request_through_its_peer() -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    dispatcher.feed(req("victim", "block"))
    dispatcher.feed(req("killer", "echo", {}))
    await sink.until(1)
    peer = handlers.peers[0]
    assert peer.cancel_request("victim") is True
    await sink.until(2)
    assert [(m["id"], "error" in m) for m in sink.messages] == [("killer", False), ("victim", True)]


async def test_aclose_waits_for_in_flight_handlers_then_cancels_the_rest_and_each_answers_once() -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    dispatcher.feed(req("slow", "wait"))
    dispatcher.feed(req("stuck", "block"))
    async with asyncio.timeout(5):
        await handlers.started.wait()
    closing = asyncio.ensure_future(dispatcher.aclose(grace_s=0.3))
    await asyncio.sleep(0)
    assert sink.messages == []  # aclose is waiting, not cancelling
    handlers.release.set()  # "slow" finishes within the grace
    await sink.until(1)
    assert sink.messages == [{"jsonrpc": "2.0", "id": "slow", "result": "released"}]
    async with asyncio.timeout(5):
        await closing
    assert [m["id"] for m in sink.messages] == ["slow", "stuck"]
    assert sink.messages[1]["error"]["code"] == -32800
    await asyncio.sleep(0)
    assert len(sink.messages) == 2  # each answered exactly once
    assert sink.via == ["put", "put"]


async def test_aclose_with_nothing_in_flight_returns_at_once() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    async with asyncio.timeout(1):
        await dispatcher.aclose(grace_s=30)
    assert sink.messages == []


async def test_registering_a_method_twice_is_an_error() -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    with pytest.raises(Exception, match="echo"):
        dispatcher.register({"echo": handlers.echo}, {})


async def test_a_refused_registration_adds_nothing_and_a_name_is_one_kind_only() -> None:
    sink = Sink()
    dispatcher, handlers = make(sink)
    with pytest.raises(ValueError, match="already registered: echo"):
        dispatcher.register({"fresh": handlers.echo, "echo": handlers.echo}, {})
    with pytest.raises(ValueError, match="already registered: note"):
        dispatcher.register({"note": handlers.echo}, {})
    with pytest.raises(ValueError, match="already registered: both"):
        dispatcher.register({"both": handlers.echo}, {"both": handlers.note})
    dispatcher.feed(req(1, "fresh"))
    dispatcher.feed(req(2, "both"))
    await sink.until(2)
    assert [m["error"]["code"] for m in sink.messages] == [-32601, -32601]  # neither was added


async def test_messages_reach_their_handlers_through_one_table_and_no_reshape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher's table is the only lookup and the params the only shape: pygls' feature table and its
    structure/handle path are never used (they would look up and reshape a second time)."""
    from pygls.feature_manager import FeatureManager
    from pygls.protocol.json_rpc import JsonRPCProtocol

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pygls' own table or reshape was used")

    for owner, name in [
        (FeatureManager, "feature"),
        (JsonRPCProtocol, "structure_message"),
        (JsonRPCProtocol, "handle_message"),
        (JsonRPCProtocol, "_get_handler"),
    ]:
        monkeypatch.setattr(owner, name, refuse)
    sink = Sink()
    dispatcher, handlers = make(sink)
    params = {"a": [1, {"b": None}]}
    dispatcher.feed(req(1, "echo", params))
    dispatcher.feed({"jsonrpc": "2.0", "method": "note", "params": params})
    await sink.until(1)
    await dispatcher.aclose()
    assert sink.messages == [{"jsonrpc": "2.0", "id": 1, "result": params}]
    assert handlers.params[0] is params and handlers.notes[0][0] is params  # the very dicts decoded


async def test_send_error_with_no_id_writes_id_null() -> None:
    from acp_server.rpc import RpcError

    sink = Sink()
    dispatcher, _ = make(sink)
    dispatcher.send_error(None, RpcError.parse_error("bad"))
    assert sink.messages == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: bad", "data": {"errorKind": "parse_error"}},
        }
    ]


async def test_notify_sends_the_params_it_was_given() -> None:
    sink = Sink()
    dispatcher, _ = make(sink)
    params: Mapping[str, Any] = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}}
    await dispatcher.notify("session/update", params)
    assert sink.messages == [{"jsonrpc": "2.0", "method": "session/update", "params": params}]
    assert sink.via == ["send"]


async def test_a_reused_in_flight_id_never_leaves_a_request_unanswered_or_running_after_aclose() -> None:
    """pygls keys its request table by id: a second request with an in-flight id must not orphan either one."""
    sink = Sink()
    dispatcher = Dispatcher(sink)
    gates: dict[int, asyncio.Event] = {1: asyncio.Event(), 2: asyncio.Event()}
    running: set[int] = set()

    async def wait(params: Any, peer: RequestPeer) -> Any:
        running.add(params["n"])
        try:
            await gates[params["n"]].wait()
            return params["n"]
        finally:
            running.discard(params["n"])

    dispatcher.register({"wait": wait}, {})
    dispatcher.feed(req(5, "wait", {"n": 1}))
    dispatcher.feed(req(5, "wait", {"n": 2}))
    await sink.until(0)
    for _ in range(5):
        await asyncio.sleep(0)
    gates[1].set()  # the first one ends (and pygls forgets id 5)
    await sink.until(1)
    async with asyncio.timeout(5):
        await dispatcher.aclose(grace_s=0.2)
    assert running == set()  # nothing outlives the connection
    assert len(sink.replies(5)) == 2  # each request answered exactly once
    assert {"jsonrpc": "2.0", "id": 5, "result": 1} in sink.messages


async def test_a_notification_fed_right_after_a_request_is_handled_after_that_request_started() -> None:
    """One read can hold ``session/prompt`` then ``session/cancel``: the cancel must find the prompt admitted."""
    sink = Sink()
    dispatcher, handlers = make(sink)
    order: list[str] = []

    async def admit(params: Any, peer: RequestPeer) -> Any:
        order.append(f"admit {params['n']}")  # the handler's first step: no suspension before it
        await handlers.release.wait()
        return "done"

    def cancel(params: Any, peer: RequestPeer) -> None:
        order.append(f"cancel {params['n']}")

    dispatcher.register({"admit": admit}, {"cancel": cancel})
    dispatcher.feed(req(1, "admit", {"n": 1}))
    dispatcher.feed({"jsonrpc": "2.0", "method": "cancel", "params": {"n": 1}})
    dispatcher.feed(req(2, "admit", {"n": 2}))  # after the deferred notification: it must not overtake it
    dispatcher.feed({"jsonrpc": "2.0", "method": "cancel", "params": {"n": 2}})
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == ["admit 1", "cancel 1", "admit 2", "cancel 2"]
    handlers.release.set()
    await sink.until(2)
    await dispatcher.aclose()
    dispatcher.feed({"jsonrpc": "2.0", "method": "cancel", "params": {"n": 3}})  # nothing scheduled: at once
    assert order[-1] == "cancel 3"
