"""``AcpEditor``: a request to the client follows the prompt's updates on the wire (it waits until the stream's
reader has handed them over), and a permission answer maps to a choice, anything odd to ``reject_once``. A prompt's
tools get only the parts of it the client advertised in ``initialize`` (else they work locally)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest
from acp import schema

from acp_server.acp import update_from_event
from acp_server.acp._editor import PERMISSION_OPTIONS, AcpEditor
from acp_server.bridge import PromptStream
from acp_server.domain import DiffContent, PromptEnded, ToolCallStarted, ToolLocation
from acp_server.errors import RemoteError
from acp_server.tools import ToolClient

from ._support import bound
from .test_convert import dumps

pytestmark = pytest.mark.anyio

SID = "0123456789abcdef0123456789abcdef"
CALL = ToolCallStarted(
    "c1",
    "Write a.txt",
    "edit",
    {"path": "a.txt", "content": "new\n"},
    (ToolLocation("/p/a.txt"),),
    (DiffContent("/p/a.txt", "old\n", "new\n"),),
)


class RecordingPeer:
    """The connection: records notifications and requests in the order they were sent; answers requests with
    ``result`` (or raises it)."""

    def __init__(self, result: Any = None) -> None:
        self.result = result
        self.log: list[tuple[str, str, Mapping[str, Any]]] = []
        self.on_late: Callable[[Any], None] | None = None

    @property
    def request_id(self) -> str | int | None:
        return 1

    def admitted(self) -> None:
        pass

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        self.log.append(("notify", method, params))

    def after_reply(self, method: str, params: Mapping[str, Any]) -> None:
        self.log.append(("after_reply", method, params))

    async def request(
        self, method: str, params: Mapping[str, Any], on_late: Callable[[Any], None] | None = None
    ) -> Any:
        self.log.append(("request", method, params))
        self.on_late = on_late
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def post_request(self, method: str, params: Mapping[str, Any]) -> None:
        self.log.append(("post_request", method, params))

    def cancel_request(self, request_id: str | int) -> bool:
        return False


def client_of(peer: RecordingPeer) -> AcpEditor:
    return AcpEditor(peer, SID)


def selected(option_id: object) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


async def test_a_permission_request_waits_until_the_call_it_is_about_was_handed_to_the_wire() -> None:
    peer = RecordingPeer(selected("allow_once"))
    client = client_of(peer)
    stream = PromptStream()
    client.stream = stream
    slow = anyio.Event()
    choices: list[str] = []

    async def reader() -> None:  # like AcpAgent.prompt, with a connection that is slow to take the update
        async for event in stream:
            if isinstance(event, PromptEnded):
                return
            await slow.wait()
            await peer.notify("session/update", update_from_event(SID, event))

    async def turn() -> None:
        await stream.send(CALL)
        choices.append(await client.request_permission(CALL))
        stream.end(PromptEnded(stop_reason="end_turn"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(turn)
            await anyio.wait_all_tasks_blocked()
            assert peer.log == []  # the reader took the announcement but has not sent it: the request waits
            slow.set()

    assert choices == ["allow_once"]
    assert [(kind, method) for kind, method, _ in peer.log] == [
        ("notify", "session/update"),
        ("request", "session/request_permission"),
    ]
    assert peer.log[0][2]["update"]["sessionUpdate"] == "tool_call"


async def test_a_permission_request_is_what_the_official_model_reads() -> None:
    peer = RecordingPeer(selected("reject_once"))
    assert await client_of(peer).request_permission(CALL) == "reject_once"
    [(_, method, params)] = peer.log
    assert method == "session/request_permission"
    request = schema.RequestPermissionRequest.model_validate(params)
    assert dumps(request) == params
    assert request.tool_call.tool_call_id == "c1" and request.tool_call.kind == "edit"
    assert [(o.option_id, o.kind) for o in request.options] == [(o["optionId"], o["kind"]) for o in PERMISSION_OPTIONS]


@pytest.mark.parametrize("choice", ["allow_once", "allow_always", "reject_once", "reject_always"])
async def test_each_offered_option_maps_to_its_choice(choice: str) -> None:
    assert await client_of(RecordingPeer(selected(choice))).request_permission(CALL) == choice


@pytest.mark.parametrize(
    "answer",
    [
        selected("allow_everything"),  # not an option we offered
        selected(None),
        selected(1),
        selected(["allow_once"]),  # unhashable: must not break the lookup
        selected({"id": "allow_once"}),
        {"outcome": {"outcome": "cancelled"}},
        {"outcome": {"outcome": "selected"}},
        {"outcome": "allow_once"},
        {"outcome": None},
        {},
        None,
    ],
    ids=repr,
)
async def test_an_unknown_option_a_cancelled_or_a_malformed_answer_rejects_once(answer: Any) -> None:
    assert await client_of(RecordingPeer(answer)).request_permission(CALL) == "reject_once"


@pytest.mark.parametrize("result", ["allow_once", ["allow_once"], 3])
async def test_an_answer_that_is_not_an_object_is_a_client_error(result: Any) -> None:
    with pytest.raises(RemoteError):  # the turn reads it as a rejection (tests/turn/test_tool_loop.py)
        await client_of(RecordingPeer(result)).request_permission(CALL)


async def test_an_error_answer_propagates_as_the_remote_error() -> None:
    error = RemoteError("no", code=-32603)
    with pytest.raises(RemoteError) as caught:
        await client_of(RecordingPeer(error)).request_permission(CALL)
    assert caught.value is error


async def test_a_terminal_created_after_its_call_was_given_up_is_released() -> None:
    """The editor answers ``terminal/create`` after the prompt was cancelled: that terminal must not run on."""
    peer = RecordingPeer(anyio.get_cancelled_exc_class()())
    client = client_of(peer)
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await client.create_terminal("make test", "/w", 1024)
    assert peer.on_late is not None
    peer.on_late({"terminalId": "t-late"})
    assert peer.log[-1] == ("post_request", "terminal/release", {"sessionId": SID, "terminalId": "t-late"})
    peer.on_late({"no": "id"})  # nothing to release
    assert peer.log[-1][1] == "terminal/release" and len([e for e in peer.log if e[0] == "post_request"]) == 1


@pytest.mark.parametrize(
    ("capabilities", "parts"),
    [
        (None, ()),  # no clientCapabilities at all
        ({}, ()),
        ({"fs": {"readTextFile": True}}, ("reader",)),
        ({"fs": {"writeTextFile": True}}, ("writer",)),
        ({"terminal": True}, ("terminal",)),
        ({"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}, ("reader", "writer", "terminal")),
        ({"fs": {"readTextFile": "yes", "writeTextFile": 1}, "terminal": "true"}, ()),  # malformed: absent
        ({"fs": True, "terminal": False}, ()),
    ],
    ids=repr,
)
async def test_a_prompts_tool_client_has_the_parts_the_client_advertised(
    capabilities: Any, parts: tuple[str, ...]
) -> None:
    async with bound() as b:
        params: dict[str, Any] = {"protocolVersion": 1}
        if capabilities is not None:
            params["clientCapabilities"] = capabilities
        await b.requests["initialize"](params, b.peer())
        session_id = await b.new_session()
        assert await b.prompt(session_id, "stop:end_turn", b.peer()) == {"stopReason": "end_turn"}
    [client] = b.runner.clients
    assert isinstance(client, ToolClient)
    assert tuple(name for name in ("reader", "writer", "terminal") if getattr(client, name) is not None) == parts
    for name in parts:  # the prompt's editor, over this connection: the one that asks for permission
        assert getattr(client, name) is client.permission
    assert isinstance(client.permission, AcpEditor)
