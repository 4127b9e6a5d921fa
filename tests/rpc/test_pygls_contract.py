"""The pygls behaviour ``acp_server.rpc._dispatcher`` relies on, pinned against the installed pygls itself.

The dispatcher overrides or reads private members of :class:`pygls.protocol.json_rpc.JsonRPCProtocol`
(``_send_data``, ``_send_response``, ``_send_handler_result``, ``_check_handler_result``, ``_request_futures``) and
uses ``msg_id``, ``fm.feature``/``fm.features``, ``structure_message`` and ``handle_message``. Each test below drives
a bare pygls protocol (a recording subclass, not our wrapper) and fails if pygls stops calling or providing what we
override, so a pygls upgrade that silently bypasses the overrides is caught here.

Responses from the client never reach pygls (the dispatcher keeps its own table of requests it sent): the last
section pins why — pygls' response path looks ids up in the table of in-flight request *tasks*.
"""

from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import Future
from typing import Any

import pytest
from lsprotocol.types import CANCEL_REQUEST
from pygls.exceptions import FeatureAlreadyRegisteredError
from pygls.protocol import default_converter
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    MsgId,
    RPCNotification,
    RPCRequest,
)
from pygls.server import JsonRPCServer

from acp_server.rpc._dispatcher import _plain_converter

pytestmark = pytest.mark.anyio


class Recorder(JsonRPCProtocol):
    """A bare pygls protocol that records every call to the members our dispatcher overrides."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[Any] = []
        self.responses: list[tuple[MsgId, Any, Any]] = []
        self.handler_results: list[tuple[Any, MsgId]] = []  # (the future pygls passed, its msg_id)
        self.checked: list[Future[Any]] = []
        self.done = asyncio.Event()

    def _send_data(self, data: Any) -> None:
        self.sent.append(data)

    def _send_response(self, msg_id: MsgId, result: Any | None = None, error: Any | None = None) -> None:
        self.responses.append((msg_id, result, error))
        super()._send_response(msg_id, result, error)

    def _send_handler_result(self, future: Future[Any], *, msg_id: MsgId) -> None:
        self.handler_results.append((future, msg_id))
        self._request_futures.pop(msg_id, None)
        self.done.set()

    def _check_handler_result(self, future: Future[Any]) -> None:
        self.checked.append(future)
        self.done.set()


def make_protocol(converter_factory: Any = _plain_converter) -> Recorder:
    server = JsonRPCServer(protocol_cls=Recorder, converter_factory=converter_factory)
    protocol = server.protocol
    assert type(protocol) is Recorder  # JsonRPCServer instantiates exactly the protocol class it is given
    return protocol


def feed(protocol: JsonRPCProtocol, message: dict[str, Any]) -> None:
    protocol.handle_message(protocol.structure_message(message))


def request(msg_id: MsgId, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


async def wait_done(protocol: Recorder, count: int = 1) -> None:
    async with asyncio.timeout(5):
        while len(protocol.handler_results) + len(protocol.checked) < count:
            protocol.done.clear()
            await protocol.done.wait()


# -- the members exist with the signatures we override --------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "parameters"),
    [
        ("_send_data", ["self", "data"]),
        ("_send_response", ["self", "msg_id", "result", "error"]),
        ("_send_handler_result", ["self", "future", "msg_id"]),
        ("_check_handler_result", ["self", "future"]),
        ("structure_message", ["self", "data"]),
        ("handle_message", ["self", "message"]),
    ],
)
def test_overridden_members_exist_with_our_signature(member: str, parameters: list[str]) -> None:
    function = getattr(JsonRPCProtocol, member)
    assert callable(function)
    assert list(inspect.signature(function).parameters) == parameters


def test_send_handler_result_takes_msg_id_by_keyword_only() -> None:
    parameter = inspect.signature(JsonRPCProtocol._send_handler_result).parameters["msg_id"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY


def test_the_protocol_keeps_a_request_table_and_a_feature_manager() -> None:
    protocol = make_protocol()
    assert protocol._request_futures == {}
    assert protocol.fm.features == {}
    assert protocol.msg_id is None  # outside any handler


# -- the request path: handle_message → task → _send_handler_result → _send_response → _send_data ----------------


async def test_a_coroutine_request_runs_as_a_task_registered_under_its_id_and_answers_through_our_overrides() -> None:
    protocol = make_protocol()
    seen: dict[str, Any] = {}

    async def handler(params: Any) -> Any:
        seen["params"] = params
        seen["task"] = asyncio.current_task()
        seen["table"] = dict(protocol._request_futures)
        seen["msg_id"] = protocol.msg_id
        await asyncio.sleep(0)
        return {"echo": params["x"]}

    protocol.fm.feature("test/echo")(handler)
    feed(protocol, request(7, "test/echo", {"x": [1, {"y": 2}]}))
    await wait_done(protocol)

    assert seen["task"] is not None
    assert seen["table"] == {7: seen["task"]}  # the in-flight table maps the id to the handler's own task
    assert seen["msg_id"] == 7
    assert seen["params"] == {"x": [1, {"y": 2}]}
    [(future, msg_id)] = protocol.handler_results
    assert msg_id == 7
    assert future is seen["task"]  # the done-callback gets the task itself
    assert future.result() == {"echo": [1, {"y": 2}]}
    assert protocol.responses == []  # pygls sends nothing itself: the reply is ours to send
    assert protocol.sent == []


async def test_the_request_table_entry_is_the_future_pygls_hands_to_send_handler_result_when_cancelled() -> None:
    protocol = make_protocol()
    started = asyncio.Event()

    async def handler(params: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    protocol.fm.feature("test/block")(handler)
    feed(protocol, request("r-1", "test/block"))
    async with asyncio.timeout(5):
        await started.wait()
    future: Any = protocol._request_futures["r-1"]  # typed as a concurrent future; an asyncio task in fact
    assert isinstance(future, asyncio.Task)
    assert future.cancel()
    await wait_done(protocol)

    [(answered, msg_id)] = protocol.handler_results
    assert msg_id == "r-1"
    assert answered is future
    assert answered.cancelled()


async def test_pygls_own_send_handler_result_calls_send_response_then_send_data() -> None:
    """Our ``_send_response`` and ``_send_data`` overrides are reached from pygls' own code paths too."""

    class Plain(JsonRPCProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.responses: list[tuple[MsgId, Any, Any]] = []
            self.sent: list[Any] = []

        def _send_response(self, msg_id: MsgId, result: Any | None = None, error: Any | None = None) -> None:
            self.responses.append((msg_id, result, error))
            super()._send_response(msg_id, result, error)

        def _send_data(self, data: Any) -> None:
            self.sent.append(data)

    protocol = JsonRPCServer(protocol_cls=Plain, converter_factory=_plain_converter).protocol
    assert isinstance(protocol, Plain)
    done: Future[Any] = Future()
    done.set_result(42)
    protocol._send_handler_result(done, msg_id=3)
    assert protocol.responses == [(3, 42, None)]
    [response] = protocol.sent
    assert isinstance(response, JsonRPCResponseMessage)
    assert (response.id, response.result) == (3, 42)


async def test_msg_id_is_per_request_task() -> None:
    protocol = make_protocol()
    both_started = asyncio.Event()
    started: list[MsgId | None] = []
    seen: dict[MsgId, MsgId | None] = {}

    async def handler(params: Any) -> Any:
        started.append(protocol.msg_id)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()  # both requests are in flight: the context must still be per task
        seen[params["me"]] = protocol.msg_id
        return None

    protocol.fm.feature("test/who")(handler)
    feed(protocol, request(1, "test/who", {"me": 1}))
    feed(protocol, request("two", "test/who", {"me": "two"}))
    await wait_done(protocol, 2)
    assert started == [1, "two"]
    assert seen == {1: 1, "two": "two"}
    assert protocol.msg_id is None  # the caller's context is untouched


async def test_a_failing_coroutine_request_reaches_send_handler_result_with_its_exception() -> None:
    protocol = make_protocol()

    async def handler(params: Any) -> Any:
        raise ValueError("boom")

    protocol.fm.feature("test/fail")(handler)
    feed(protocol, request(9, "test/fail"))
    await wait_done(protocol)
    [(future, msg_id)] = protocol.handler_results
    assert msg_id == 9
    assert isinstance(future.exception(), ValueError)
    assert protocol.sent == []  # pygls did not answer with its traceback-carrying error on its own


# -- notifications ----------------------------------------------------------------------------------------------


async def test_a_sync_notification_handler_is_checked_by_check_handler_result_and_never_answered() -> None:
    protocol = make_protocol()
    calls: list[Any] = []

    def handler(params: Any) -> None:
        calls.append(params)
        raise RuntimeError("notification failed")

    protocol.fm.feature("test/note")(handler)
    feed(protocol, {"jsonrpc": "2.0", "method": "test/note", "params": {"a": 1}})
    # a synchronous handler runs inline: the check has happened when handle_message returns
    assert calls == [{"a": 1}]
    [future] = protocol.checked
    assert isinstance(future.exception(), RuntimeError)
    assert protocol.handler_results == []
    assert protocol.responses == []
    assert protocol.sent == []
    assert protocol._request_futures == {}  # notifications never enter the request table


async def test_acp_cancel_request_is_not_pygls_builtin_cancel_and_reaches_our_handler() -> None:
    """pygls intercepts LSP's ``$/cancelRequest`` itself; ACP's ``$/cancel_request`` must reach the handler."""
    assert CANCEL_REQUEST != "$/cancel_request"
    protocol = make_protocol()
    calls: list[Any] = []
    protocol.fm.feature("$/cancel_request")(lambda params: calls.append(params))
    feed(protocol, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}})
    assert calls == [{"requestId": 5}]


# -- registry ---------------------------------------------------------------------------------------------------


def test_feature_registers_under_its_name_lists_it_and_refuses_a_second_registration() -> None:
    protocol = make_protocol()

    async def handler(params: Any) -> Any:
        return params

    protocol.fm.feature("session/prompt")(handler)
    assert "session/prompt" in protocol.fm.features
    assert protocol.fm.features["session/prompt"] is handler  # no server argument wrapped in (no ``ls`` param)
    assert protocol.fm.builtin_features == {}
    with pytest.raises(FeatureAlreadyRegisteredError):
        protocol.fm.feature("session/prompt")(handler)


async def test_handle_message_dispatches_to_the_registered_feature_with_params_only() -> None:
    protocol = make_protocol()
    calls: list[tuple[Any, ...]] = []

    async def handler(*args: Any) -> Any:
        calls.append(args)
        return None

    protocol.fm.feature("a/b")(handler)
    feed(protocol, request(1, "a/b", {"k": "v"}))
    await wait_done(protocol)
    assert calls == [({"k": "v"},)]


# -- structure_message with our converter -----------------------------------------------------------------------


def test_structure_message_asks_the_converter_for_the_generic_message_classes() -> None:
    asked: list[type[Any]] = []

    class Recording:
        """Our converter, with every ``structure`` call recorded (cattrs converters are slotted: wrap, not patch)."""

        def __init__(self) -> None:
            self._inner = _plain_converter()

        def structure(self, obj: Any, cls: Any) -> Any:
            asked.append(cls)
            return self._inner.structure(obj, cls)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    protocol = make_protocol(Recording)
    protocol.structure_message(request(1, "x/y", {"a": 1}))
    protocol.structure_message({"jsonrpc": "2.0", "method": "x/z", "params": {"a": 1}})
    assert asked == [JsonRPCRequestMessage, JsonRPCNotification]


def test_structure_message_with_our_converter_keeps_params_plain_dicts() -> None:
    protocol = make_protocol()
    params = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}], "_meta": {"a": {"b": None}}}
    structured = protocol.structure_message(request("id-1", "session/prompt", params))
    assert isinstance(structured, RPCRequest)
    assert structured.id == "id-1"
    assert structured.params == params
    assert type(structured.params) is dict
    assert type(structured.params["prompt"][0]) is dict

    note = protocol.structure_message({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
    assert isinstance(note, RPCNotification)
    assert not isinstance(note, RPCRequest)
    assert type(note.params) is dict
    assert note.params == {"sessionId": "s"}


def test_pygls_default_converter_would_not_keep_params_as_dicts() -> None:
    """Why the dispatcher needs its converter: without it, params would not arrive as the dicts the schema wants."""
    protocol = make_protocol(default_converter)
    structured = protocol.structure_message(request(1, "session/prompt", {"sessionId": "s"}))
    assert type(structured.params) is not dict


# -- why responses bypass pygls --------------------------------------------------------------------------------


async def test_pygls_routes_a_response_to_the_table_of_in_flight_request_tasks() -> None:
    """pygls' ``send_request`` futures share ``_request_futures`` with the client's in-flight requests: a client
    response carrying the id of one of its own requests would be handed to that handler's task (a crash, and the
    request forgotten). Hence the dispatcher's own table of outgoing requests, and responses kept away from pygls."""
    protocol = make_protocol()
    started = asyncio.Event()

    async def handler(params: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    protocol.fm.feature("test/block")(handler)
    feed(protocol, request(5, "test/block"))
    async with asyncio.timeout(5):
        await started.wait()
    task = protocol._request_futures[5]
    with pytest.raises(RuntimeError):  # Task.set_result
        feed(protocol, {"jsonrpc": "2.0", "id": 5, "result": 1})
    assert 5 not in protocol._request_futures  # the handler's entry is gone: it could no longer be cancelled by id
    task.cancel()
    await wait_done(protocol)


def test_pygls_send_request_registers_its_future_in_the_request_table_and_writes_at_once() -> None:
    protocol = make_protocol()
    future = protocol.send_request("fs/read_text_file", {"path": "/x"})
    [(msg_id, registered)] = protocol._request_futures.items()
    assert registered is future  # the same table as the in-flight request tasks
    [sent] = protocol.sent  # written synchronously through _send_data: no origin, no backpressure
    assert isinstance(sent, JsonRPCRequestMessage) and sent.id == msg_id
